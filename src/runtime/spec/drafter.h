// Speculative decoding: a drafter guesses the next few tokens of a sequence; the engine
// verifies them in one step (k + 1 rows of the target) and keeps the ones the target agrees
// with (verify.h). A DraftSource is what a request names (prompt lookup, a draft model, a
// draft program derived from the target); it makes one Drafter per sequence, which keeps that
// sequence's drafting state (a draft model's KV, for instance). Both run on the thread that
// drives the engine.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::runtime::spec {

class StepCost;

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` (>= 1) tokens likely to follow `context`: the prompt and every token committed
  // so far, the last of which the target has not yet computed. Fewer (or none) when it has no
  // good guess. Drafters are deterministic: the verification treats a draft as a point mass.
  virtual std::vector<int32_t> draft(std::span<const int32_t> context, int32_t max) = 0;
  // True when the drafter picks how many tokens pay (prompt lookup, from its own acceptance
  // estimates): the engine then asks for up to the request's draft_max every step and leaves
  // its adaptive length and back-off (draft_length.h) out. False: the engine's length decides.
  virtual bool sizes_own_drafts() const { return false; }
  // What the engine's steps cost by row count (draft_gain.h), for a drafter that sizes its own
  // drafts; the engine sets it at admission and outlives the drafter. Unset: the CPU table.
  void set_step_cost(const StepCost* cost) { step_cost_ = cost; }

 protected:
  const StepCost* step_cost_ = nullptr;
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual std::unique_ptr<Drafter> make() const = 0;
  virtual std::string name() const = 0;  // "lookup", "draft:PATH", "layers:K"
};

// What a request asks of speculation: no source, no speculation.
struct Speculation {
  std::shared_ptr<const DraftSource> source;
  // Most draft tokens per step (the running acceptance rate picks fewer). 7 was chosen while
  // the fast CPU backend gave 9+ row steps other bits than 1-row steps on Q5_0 weights; that is
  // fixed (batch_invariance_test's SeveralBlocksLegacy), so it is now only a default, not a
  // bound for exactness: a larger one has not been measured.
  static constexpr int32_t kDefaultDraftMax = 7;
  int32_t draft_max = kDefaultDraftMax;
};

}  // namespace loom::runtime::spec
