#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "common/error.h"

namespace loom::runtime {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

bool by_logit_desc(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

Sampler::Sampler(SamplerParams params) : p_(params), rng_(params.seed) {
  if (p_.penalty_last_n < 0) loom::fail("penalty window must be >= 0, got {}", p_.penalty_last_n);
  if (!(p_.repeat_penalty > 0)) loom::fail("repeat penalty must be > 0, got {}", p_.repeat_penalty);
}

void Sampler::reset() {
  recent_.clear();
  rng_ = Rng(p_.seed);
}

void Sampler::accept(int32_t token) {
  if (p_.penalty_last_n == 0) return;
  recent_.push_back(token);
  while (recent_.size() > size_t(p_.penalty_last_n)) recent_.pop_front();
}

// llama.cpp's llama_sampler_penalties: a positive logit is divided by the repeat penalty, a
// negative one multiplied; then count * frequency + presence is subtracted.
void Sampler::apply_penalties(std::vector<Candidate>& c) const {
  if (recent_.empty() || (p_.repeat_penalty == 1.0f && p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f))
    return;
  std::unordered_map<int32_t, int> count;
  for (int32_t t : recent_) ++count[t];
  for (auto& x : c) {
    auto it = count.find(x.id);
    if (it == count.end()) continue;
    x.logit = x.logit <= 0 ? x.logit * p_.repeat_penalty : x.logit / p_.repeat_penalty;
    x.logit -= float(it->second) * p_.frequency_penalty + p_.presence_penalty;
  }
}

void Sampler::softmax(std::vector<Candidate>& c) {
  std::sort(c.begin(), c.end(), by_logit_desc);
  const float mx = c.front().logit;
  double sum = 0;
  for (auto& x : c) sum += (x.p = std::exp(x.logit - mx));
  for (auto& x : c) x.p = float(x.p / sum);
}

void Sampler::top_k(std::vector<Candidate>& c, int32_t k) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), by_logit_desc);
  c.resize(k);
}

// Keeps the smallest set of most likely tokens whose probabilities sum to at least p.
void Sampler::top_p(std::vector<Candidate>& c, float p) {
  if (p >= 1.0f || c.size() <= 1) return;
  softmax(c);
  double cum = 0;
  size_t keep = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c[i].p;
    if (cum >= p) {
      keep = i + 1;
      break;
    }
  }
  c.resize(std::max<size_t>(keep, 1));
}

// Keeps tokens whose probability is at least p times the most likely one's.
void Sampler::min_p(std::vector<Candidate>& c, float p) {
  if (p <= 0.0f || c.size() <= 1) return;
  float mx = -INFINITY;
  for (auto& x : c) mx = std::max(mx, x.logit);
  const float floor = mx + std::log(p);
  std::erase_if(c, [&](const Candidate& x) { return x.logit < floor; });
}

// Greedy without building the candidate list: the penalties change only the logits of tokens
// in the window, so the argmax runs over the raw row with those few replaced.
int32_t Sampler::argmax(std::span<const float> logits, const uint64_t* allowed) const {
  std::vector<Candidate> pen;
  if (!recent_.empty() && (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f)) {
    for (int32_t t : recent_)
      if (t >= 0 && size_t(t) < logits.size()) pen.push_back({t, logits[size_t(t)]});
    std::sort(pen.begin(), pen.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    pen.erase(std::unique(pen.begin(), pen.end(), [](const Candidate& a, const Candidate& b) { return a.id == b.id; }),
              pen.end());
    apply_penalties(pen);
  }
  Candidate best{-1, -INFINITY};
  size_t k = 0;  // next penalized id (ascending)
  for (size_t i = 0; i < logits.size(); ++i) {
    float x = logits[i];
    if (k < pen.size() && size_t(pen[k].id) == i) x = pen[k++].logit;
    if (allowed && !((allowed[i >> 6] >> (i & 63)) & 1)) continue;
    if (x > best.logit || best.id < 0) best = {int32_t(i), x};  // ties keep the lowest id
  }
  if (best.id < 0) loom::fail("sampler: the constraint allows no token");
  return best.id;
}

std::vector<Candidate> Sampler::distribution(std::span<const float> logits, const uint64_t* allowed) const {
  if (logits.empty()) loom::fail("sampler: empty logits");
  std::vector<Candidate> c;
  if (!allowed) {
    c.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) c[i] = {int32_t(i), logits[i]};
  } else {
    for (size_t w = 0; w < (logits.size() + 63) / 64; ++w)
      for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
        const size_t i = w * 64 + size_t(__builtin_ctzll(bits));
        if (i < logits.size()) c.push_back({int32_t(i), logits[i]});
      }
    if (c.empty()) loom::fail("sampler: the constraint allows no token");
  }
  chain(c);
  return c;
}

void Sampler::chain(std::vector<Candidate>& c) const {
  apply_penalties(c);
  top_k(c, p_.top_k);
  top_p(c, p_.top_p);
  min_p(c, p_.min_p);
  for (auto& x : c) x.logit /= p_.temperature;
  softmax(c);
}

// top-k's cut is the first step of the chain that drops tokens by rank; top-p, min-p and the
// temperature then see only what it kept. A penalty (before the cut) changes logits by token,
// so the cut would have to see the whole row.
int32_t Sampler::candidates_needed() const {
  const bool penalties = p_.penalty_last_n > 0 &&
                         (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f);
  if (penalties) return 0;
  if (p_.temperature <= 0.0f) return 1;
  return std::max(p_.top_k, 0);
}

int32_t Sampler::sample_top(std::vector<Candidate> top) {
  const int32_t need = candidates_needed();
  if (need == 0 || top.size() < size_t(need)) loom::fail("sampler: {} top entries where {} are needed", top.size(), need);
  if (p_.temperature <= 0.0f) return top.front().id;
  chain(top);
  return draw(top);
}

int32_t Sampler::draw(const std::vector<Candidate>& c, double total) {
  if (c.empty()) loom::fail("sampler: nothing to draw from");
  const double u = rng_.uniform() * total;
  double cum = 0;
  for (const auto& x : c) {
    cum += x.p;
    if (u < cum) return x.id;
  }
  return c.back().id;  // rounding left u just above the total
}

int32_t Sampler::sample(std::span<const float> logits, const uint64_t* allowed) {
  if (logits.empty()) loom::fail("sampler: empty logits");
  if (p_.temperature <= 0.0f) return argmax(logits, allowed);
  return draw(distribution(logits, allowed));
}

Logprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n) {
  if (logits.empty()) loom::fail("token_logprobs: empty logits");
  if (token < 0 || size_t(token) >= logits.size()) loom::fail("token_logprobs: token {} outside the vocabulary", token);
  const size_t n = std::min(size_t(std::max(top_n, 0)), logits.size());
  // The top n by insertion into a short sorted list: a logit enters only when it beats the
  // smallest kept (strictly, so an equal logit of a higher id stays out), which after the first
  // few hundred ids is rare.
  std::vector<TokenLogprob> top;
  top.reserve(n + 1);
  float mx = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    mx = std::max(mx, x);
    if (n == 0 || (top.size() == n && !(x > top.back().logprob))) continue;
    auto at = std::upper_bound(top.begin(), top.end(), x, [](float v, const TokenLogprob& c) { return v > c.logprob; });
    top.insert(at, {int32_t(i), x});
    if (top.size() > n) top.pop_back();
  }
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x) - double(mx));
  const double lse = double(mx) + std::log(sum);
  Logprobs out;
  out.logprob = float(double(logits[size_t(token)]) - lse);
  for (auto& c : top) c.logprob = float(double(c.logprob) - lse);
  out.top = std::move(top);
  return out;
}

}  // namespace loom::runtime
