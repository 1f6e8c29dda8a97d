// One side of a comparison: a program that turns tokens into logits and can be timed. The
// session's arms are EngineArms (a .loom program opened on a backend), or, when the workload
// builds the engine from source, ProcessArms (tune/process_arm.h: the built binary running an
// EngineArm in a child); the gates only see this interface, so a test can hand them a
// deliberately cheating arm and show it is rejected.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::tune {

struct Timed {
  double prefill_seconds = 0;  // the prompt, from the call to its last logits (TTFT)
  double decode_seconds = 0;   // the generated tokens after it
  int prompt_tokens = 0, generated_tokens = 0;
  // The work of the call outside the timed region (the warm prefix, the sequence's set-up): with
  // seconds() it accounts for the call's wall time, which the timing audit checks.
  double untimed_seconds = 0;
  double seconds() const { return prefill_seconds + decode_seconds; }
};

class Arm {
 public:
  virtual ~Arm() = default;
  // Writes the logits of every position of `tokens` into `out` ([tokens x vocab], row-major).
  // The caller owns both buffers: it poisons `out` first and checks `tokens` after.
  virtual void logits(std::span<const int32_t> tokens, std::span<float> out) = 0;
  // Prefill of `prompt` on a fresh sequence, then `generate` greedy decode steps. `warm`: the
  // prompt's prefix (all but its last token) is fed first, outside the timed region, as a
  // prefix-cache hit would leave it (a system prompt shared by every request); the timed
  // prefill is the last token alone.
  virtual Timed timed_run(std::span<const int32_t> prompt, int generate, bool warm) = 0;
  virtual int64_t vocab() const = 0;
  virtual int threads() const = 0;  // what the arm says it uses; the gate also counts
  // An arm running in a process of its own: that process's OS threads now (its main thread
  // included). Null: the arm runs in this process, whose threads the gate counts.
  virtual std::optional<int> own_threads() const { return std::nullopt; }
};

struct ArmSpec {
  std::string program, gguf, backend = "cpu";
  int threads = 1;
  int32_t n_ctx = 512;
};

// Opens `spec.program` with its weights on the backend (the schedule checked against the
// backend's keys by the compile); throws loom::Error when it does not build.
std::unique_ptr<Arm> open_engine_arm(const ArmSpec& spec);
// Runs `spec.program` as a child `BINARY tune-arm ...` (a loom built from the workload's source),
// its stderr appended to `log_path` (tune/process_arm.h).
std::unique_ptr<Arm> open_process_arm(const ArmSpec& spec, const std::string& binary, const std::string& log_path);

// Tokens of each text for the program's tokenizer (BOS added where the vocabulary adds one).
// Each must have at least `min_tokens` (a scored text needs 2: one predicted token).
std::vector<std::vector<int32_t>> tokenize_for(const ArmSpec& spec, const std::vector<std::string>& texts, size_t min_tokens);

}  // namespace loom::tune
