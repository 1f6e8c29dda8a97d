// The accept/reject rule of speculative decoding, one draft token at a time, against the
// target's logits row at that position. Drafters are deterministic (drafter.h), so the draft
// distribution q is a point mass on d and the standard rule (accept with min(1, p/q), else
// draw from the normalised residual max(0, p - q)) becomes: accept d with probability p(d),
// else draw from p with d removed and renormalised. p is the distribution the sampler would
// draw from — after penalties, top-k, top-p, min-p and temperature — so the tokens emitted
// are distributed exactly as plain sampling's. At temperature 0 the target's choice is the
// argmax and the draft is accepted when it equals it: the same tokens as plain decoding.
#pragma once
#include <cstdint>
#include <span>

#include "runtime/sampler.h"

namespace loom::runtime::spec {

struct Verdict {
  int32_t token = -1;     // the token emitted at this position (the draft when accepted)
  bool accepted = false;  // the draft was kept: the next row's verdict follows
};

// Consumes the sampler's random numbers (one uniform, two on rejection); does not record the
// token in the penalty window (the caller accepts it, as after Sampler::sample).
Verdict verify_draft(Sampler& sampler, std::span<const float> logits, int32_t draft);

}  // namespace loom::runtime::spec
