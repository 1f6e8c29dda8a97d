// What a front end hands the engine (Request) and what it gets back, step by step (Event).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/spec/drafter.h"

namespace loom::text::constrain { class Constraint; }

namespace loom::runtime {

using RequestId = uint64_t;

struct Request {
  std::vector<int32_t> prompt;  // token ids, BOS included when wanted
  SamplerParams sampling;       // with its own seed: one request, one token sequence
  int32_t max_tokens = -1;      // tokens to generate at most, the end token included; < 0: until the context is full
  std::set<int32_t> stop;       // tokens that end generation besides the vocabulary's end-of-generation set
  bool ignore_eog = false;      // do not stop at end-of-generation tokens (benchmarks)
  // Report each sampled token's log-probability and the top_logprobs (0..kMaxTopLogprobs) most
  // likely tokens with its event, from the raw logits (sampler.h: token_logprobs). Off: no cost.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Leave this request's full blocks in the prefix cache: shareable while it runs and kept
  // (least recently used first to go) after it ends, so a next chat turn or a request with the
  // same system prompt starts from them.
  bool cache_prefix = true;
  // Speculative decoding (runtime/spec/): drafts from this source are verified k + 1 rows at a
  // time; the tokens are the same as without (at temperature > 0, the same distribution).
  spec::Speculation speculation;
  // Structured output (text/constrain/constraint.h): only tokens the grammar allows are
  // sampled, end-of-generation only once the output is complete, and the request ends
  // (Finish::stop) when nothing more may follow. One per request: it holds the parse state.
  std::shared_ptr<text::constrain::Constraint> constraint;
};

enum class Finish { none, eog, stop, length, cancelled, error };
const char* finish_name(Finish f);

struct RequestStats {
  int32_t prompt_tokens = 0;    // of the prompt
  int32_t reused_tokens = 0;    // prompt tokens whose KV came from the prefix cache
  int32_t evaluated_tokens = 0; // prompt tokens computed (prompt - reused)
  int32_t generated = 0;        // tokens sampled, the end token included
  double queue_seconds = 0;     // submitted -> admitted
  double prompt_seconds = 0;    // admitted -> first token sampled
  double gen_seconds = 0;       // first token -> finish
  int32_t drafted = 0;          // draft tokens verified
  int32_t draft_accepted = 0;   // of them, kept
  int32_t verify_steps = 0;     // steps that verified a draft (each emits 1 + its accepted drafts)
  std::string speed_line() const;  // "prompt: 12 tokens, 180.2 t/s | generation: 64 tokens, 45.1 t/s"
};

// One event per request that moved in a step: a sampled token with the text it completed,
// and/or the end of the request.
struct Event {
  RequestId id = 0;
  int32_t token = -1;           // -1: no token this event (cancelled, error)
  std::string text;             // complete UTF-8 (possibly empty: a character still incomplete,
                                // or an end token, whose text is not shown)
  Finish finish = Finish::none;
  std::string error;            // finish == error: what went wrong
  RequestStats stats;           // filled when finish != none
  std::optional<Logprobs> logprobs;  // token >= 0 and the request asked for logprobs
};

// submit()'s answer: an id, or why the request can never run on this engine.
struct Submitted {
  RequestId id = 0;
  std::string refused;
  bool ok() const { return refused.empty(); }
};

}  // namespace loom::runtime
