// Picks the next token from logits, in llama.cpp's default chain order:
//   penalties (repeat / presence / frequency over the last n tokens) -> top-k -> top-p ->
//   min-p -> temperature -> draw.
// temperature <= 0 means greedy: the argmax after penalties (lowest id on ties).
// The draw uses Loom's own PRNG (xoshiro256**, seeded by splitmix64) and its own inverse-CDF
// walk, never std::*_distribution, so one seed gives one token sequence on every platform.
// Constrained output enters as a mask applied before the chain: a token outside it is never
// a candidate (text/constrain/constraint.h computes it).
// token_logprobs() reports log-probabilities of the raw logits, before any of the chain.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace loom::runtime {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;          // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64; // window of recent tokens the penalties look at
  uint64_t seed = 0;
};

// xoshiro256** (Blackman & Vigna), state filled from splitmix64(seed).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1) with 53 random bits
 private:
  uint64_t s_[4];
};

struct Candidate {
  int32_t id;
  float logit;
  float p = 0.f;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams params);
  // Picks a token; does not record it (call accept, so prompt tokens can be fed too).
  // `allowed` (logits.size() bits, bit i of word i / 64), when given, is the constraint's mask:
  // only its tokens are candidates, before penalties, top-k/p, min-p and temperature. It
  // must allow at least one token.
  int32_t sample(std::span<const float> logits, const uint64_t* allowed = nullptr);
  // How many of a row's largest logits sample() reads at most when given no mask: 1 when
  // greedy, top_k when that cuts the chain; 0 when it may read any (no top-k, or a penalty
  // that can lift a token from below the cut). A backend may then send only those rows' top
  // entries (backend::Plan::run_top).
  int32_t candidates_needed() const;
  // sample() from a row's `top` largest logits, most likely first (lowest id first among equal
  // logits), at least candidates_needed() of them: the token sample() picks from the whole row.
  int32_t sample_top(std::vector<Candidate> top);
  // Records a token in the penalty window.
  void accept(int32_t token);
  void reset();  // clears the window and reseeds
  const SamplerParams& params() const { return p_; }

  // The pieces sample() is made of, for speculative verification (spec/verify.h), which needs
  // the distribution itself: the candidates left after the whole chain (penalties, top-k/p,
  // min-p, temperature) with their probabilities, most likely first (temperature > 0 only);
  // a draw from candidates whose p sum to `total` (a residual after removing a rejected draft
  // sums to less than 1); a uniform [0, 1).
  std::vector<Candidate> distribution(std::span<const float> logits, const uint64_t* allowed = nullptr) const;
  int32_t draw(const std::vector<Candidate>& c, double total = 1.0);
  double uniform() { return rng_.uniform(); }

  // The chain's steps, exposed for tests. Each keeps at least one candidate.
  void apply_penalties(std::vector<Candidate>& c) const;
  static void top_k(std::vector<Candidate>& c, int32_t k);
  static void top_p(std::vector<Candidate>& c, float p);
  static void min_p(std::vector<Candidate>& c, float p);
  static void softmax(std::vector<Candidate>& c);  // sorts by logit, descending; fills p

 private:
  int32_t argmax(std::span<const float> logits, const uint64_t* allowed) const;
  void chain(std::vector<Candidate>& c) const;  // penalties, top-k, top-p, min-p, temperature, softmax
  SamplerParams p_;
  Rng rng_;
  std::deque<int32_t> recent_;
};

// Log-probabilities of one position, from the model's raw logits (before penalties, top-k/p,
// min-p and temperature, as OpenAI and vLLM's default report them): the same logits give the
// same numbers whatever the request's sampling.
constexpr int32_t kMaxTopLogprobs = 20;
struct TokenLogprob {
  int32_t id;
  float logprob;
};
struct Logprobs {
  float logprob = 0;              // of the sampled token
  std::vector<TokenLogprob> top;  // the top_n most likely tokens, most likely first (ties: lowest id)
};
// log_softmax(logits)[token] and the top_n (clamped to [0, vocab]) entries, in one pass for the
// log-sum-exp and a partial selection of top_n (no sort of the vocabulary).
Logprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n);

}  // namespace loom::runtime
