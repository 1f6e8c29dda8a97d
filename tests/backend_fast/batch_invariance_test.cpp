// The fast backend is batch-invariant: a row's logits are the same bits whichever rows share
// its step. A server's reply to a request at temperature 0 then equals the reply to the same
// request served alone, whether its prompt ran in one chunk or several, beside other
// sequences' decode tokens or prompt chunks, or after a prefix-cache hit (issue 12's load
// test). Checked on synthetic programs with GQA, a sliding window and attention softcap, with
// the default KV chunk and a small one (several chunks, partial chunks at block edges).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "backend/cpu/fast/fast_backend.h"
#include "../backend/kv_fixture.h"
#include "synthetic_program.h"

using namespace loom;

namespace {

constexpr int kLen = 45;  // tokens of the sequence under test

std::vector<int32_t> tokens(int vocab, int seed) {
  std::vector<int32_t> t(kLen);
  for (int i = 0; i < kLen; ++i) t[size_t(i)] = int32_t((i * 37 + seed * 11 + 5) % vocab);
  return t;
}

struct Harness {
  loom::testing::SyntheticModel sm;
  std::unique_ptr<backend::Plan> plan;
  Harness(loom::testing::SyntheticSpec spec, int64_t chunk, int threads) : sm(loom::testing::make_synthetic(spec)) {
    ir::Module m = sm.module;
    if (chunk > 0) m.schedule.push_back({"attention", "", {{"chunk", ir::AttrValue(chunk)}}, {}});
    auto ws = backend::WeightSource::bind(m, *sm.file);
    plan = backend::cpu::make_fast_backend()->compile(m, ws, {threads});
  }
  int64_t V() const { return plan->vocab_size(); }
};

// Logits of every position of sequence 0 (tokens `a`), computed in steps whose rows of
// sequence 0 are given by `cuts` (chunk lengths), each step also carrying `others` rows of
// sequence 1 (tokens `b`, continuing where its previous step stopped; 0: none).
std::vector<float> run(Harness& h, const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                       const std::vector<int>& cuts, int others) {
  loom::testing::TestKv kv(*h.plan, backend::KvElem::f16, 2 * kLen, 2, 4);
  std::vector<float> out(size_t(kLen * h.V()));
  int pos = 0, pos_b = 0;
  for (size_t c = 0; pos < kLen; ++c) {
    const int n = std::min(c < cuts.size() ? cuts[c] : 1, kLen - pos);
    backend::StepBatch s;
    // Sequence 1's rows first in odd steps, after in even ones: the rows' order must not matter.
    auto add_b = [&] {
      for (int i = 0; i < others && pos_b < kLen; ++i, ++pos_b) {
        s.tokens.push_back(b[size_t(pos_b)]);
        s.positions.push_back(pos_b);
        s.seq_ids.push_back(1);
        s.want_logits.push_back(1);
      }
    };
    if (c % 2) add_b();
    const size_t first = s.size();
    for (int i = 0; i < n; ++i) {
      s.tokens.push_back(a[size_t(pos + i)]);
      s.positions.push_back(pos + i);
      s.seq_ids.push_back(0);
      s.want_logits.push_back(1);
    }
    if (c % 2 == 0) add_b();
    std::vector<float> logits(s.size() * size_t(h.V()));
    kv.run(*h.plan, s, logits.data());
    std::memcpy(out.data() + size_t(pos) * size_t(h.V()), logits.data() + first * size_t(h.V()),
                size_t(n) * size_t(h.V()) * sizeof(float));
    pos += n;
  }
  return out;
}

void expect_identical(const std::vector<float>& want, const std::vector<float>& got, int64_t V, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": position " << int64_t(i) / V << " logit " << int64_t(i) % V << ": " << want[i]
                    << " alone vs " << got[i];
      return;
    }
}

void check(loom::testing::SyntheticSpec spec, int64_t chunk) {
  Harness h(spec, chunk, 2);
  const auto a = tokens(spec.V, 1), b = tokens(spec.V, 2);
  const auto alone = run(h, a, b, {kLen}, 0);  // the whole prompt in one step
  const int64_t V = h.V();
  expect_identical(alone, run(h, a, b, {1}, 0), V, "one token per step");
  expect_identical(alone, run(h, a, b, {13, 20, 3}, 0), V, "chunks of 13, 20, 3, then decode");
  expect_identical(alone, run(h, a, b, {7, 16, 1, 9}, 1), V, "beside another sequence's decode tokens");
  expect_identical(alone, run(h, a, b, {5, 30}, 12), V, "beside another sequence's prompt chunks");
  expect_identical(alone, run(h, a, b, {2, 2, 2, 17}, 40), V, "beside a long chunk of another sequence");
  Harness one(spec, chunk, 1);
  expect_identical(alone, run(one, a, b, {kLen}, 0), V, "one thread");
}

}  // namespace

TEST(FastBatchInvariance, Llama) { check({}, 0); }

TEST(FastBatchInvariance, SmallChunks) { check({}, 8); }

TEST(FastBatchInvariance, SlidingWindowAndSoftcap) {
  loom::testing::SyntheticSpec s;
  s.window = 6;
  s.attn_softcap = 20;
  s.gemma = true;
  s.H = 4;
  s.HKV = 1;
  s.DH = 64;
  check(s, 0);
  check(s, 5);
}
