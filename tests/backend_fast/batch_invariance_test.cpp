// The fast backend is batch-invariant: a row's logits are the same bits whichever rows share
// its step. A server's reply to a request at temperature 0 then equals the reply to the same
// request served alone, whether its prompt ran in one chunk or several, beside other
// sequences' decode tokens or prompt chunks, or after a prefix-cache hit (issue 12's load
// test). Checked on synthetic programs with GQA, a sliding window and attention softcap, with
// the default KV chunk and a small one (several chunks, partial chunks at block edges).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/fast/repack.h"
#include "quant/simd/kernels.h"
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
  Harness(loom::testing::SyntheticSpec spec, int64_t chunk, int threads, const std::string& isa = "auto",
          int64_t stream_rows = 0)
      : sm(loom::testing::make_synthetic(spec)) {
    ir::Module m = sm.module;
    if (chunk > 0) m.schedule.push_back({"attention", "", {{"chunk", ir::AttrValue(chunk)}}, {}});
    if (isa != "auto") m.schedule.push_back({"", "", {{"isa", ir::AttrValue(isa)}}, {}});
    if (stream_rows > 0) m.schedule.push_back({"", "", {{"matmul_stream_rows", ir::AttrValue(stream_rows)}}, {}});
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

void check(loom::testing::SyntheticSpec spec, int64_t chunk, const std::string& isa = "auto", int64_t stream_rows = 0) {
  SCOPED_TRACE("isa " + isa);
  Harness h(spec, chunk, 2, isa, stream_rows);
  const auto a = tokens(spec.V, 1), b = tokens(spec.V, 2);
  const auto alone = run(h, a, b, {kLen}, 0);  // the whole prompt in one step
  const int64_t V = h.V();
  expect_identical(alone, run(h, a, b, {1}, 0), V, "one token per step");
  expect_identical(alone, run(h, a, b, {13, 20, 3}, 0), V, "chunks of 13, 20, 3, then decode");
  expect_identical(alone, run(h, a, b, {7, 16, 1, 9}, 1), V, "beside another sequence's decode tokens");
  expect_identical(alone, run(h, a, b, {5, 30}, 12), V, "beside another sequence's prompt chunks");
  expect_identical(alone, run(h, a, b, {2, 2, 2, 17}, 40), V, "beside a long chunk of another sequence");
  Harness one(spec, chunk, 1, isa, stream_rows);
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

// Real shapes: matmul inner dims of several (super-)blocks (E = 768: 3 super-blocks / 24
// blocks, F = 1536: 6 / 48), with every weight type the fast backend has kernels for. With
// `matmul_stream_rows = 8` a step of up to 8 rows runs the weight-streaming tiles (on the
// stored rows where the weight is not packed), more rows the prefill GEMM tiles -- for Q5_0 in
// stored rows on a Q8_0 copy (repack.h) -- and each row's result must not depend on which ran. (Gemma-3-270M Q4_K_M keeps attn_q/k and ffn_gate/up in Q5_0: its `loom logits -b 9`
// differed from `-b 1` by up to ~5 until the Q5_0 kernels matched the Q8_0 ones lane for lane.)
// Every ISA level this host runs.
static loom::testing::SyntheticSpec wide(gguf::TensorType w, gguf::TensorType v) {
  loom::testing::SyntheticSpec s;
  s.E = 768;
  s.F = 1536;
  s.H = 12;
  s.HKV = 4;
  s.DH = 64;
  s.L = 1;
  s.wtype = w;
  s.vtype = v;
  return s;
}

// The ISA caps worth running here: "auto" only where it is above avx2 (AVX-512 hosts).
static std::vector<std::string> isa_caps() {
  std::vector<std::string> v{"avx2", "scalar"};
  if (quant::simd::best_isa() > quant::simd::Isa::avx2) v.insert(v.begin(), "auto");
  return v;
}

TEST(FastBatchInvariance, SeveralSuperBlocksKQuants) {
  using T = gguf::TensorType;
  for (const std::string& isa : isa_caps()) {
    check(wide(T::Q4_K, T::Q6_K), 0, isa, 8);
    check(wide(T::Q5_K, T::Q6_K), 0, isa, 8);
  }
}

TEST(FastBatchInvariance, SeveralBlocksLegacy) {
  using T = gguf::TensorType;
  for (const std::string& isa : isa_caps()) {
    check(wide(T::Q4_0, T::Q5_0), 0, isa, 8);
    check(wide(T::Q4_1, T::Q8_0), 0, isa, 8);
    check(wide(T::Q5_1, T::F16), 0, isa, 8);
  }
}

// Prefill dots Q5_0 weights on their Q8_0 copy (repack.h), decode on the stored rows: the
// kernels must give the same bits for both, at every ISA level, on fresh random rows.
TEST(FastBatchInvariance, Q5_0PrefillCopyDotsLikeStoredRows) {
  using T = gguf::TensorType;
  namespace simd = loom::quant::simd;
  const simd::Isa saved = simd::isa();
  const int64_t k = 640, rows = 5, n_act = 3;
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(k * rows));
  for (auto& v : x) v = nd(rng);
  const size_t wrb = loom::quant::row_size(T::Q5_0, k), arb = loom::quant::row_size(T::Q8_0, k);
  std::vector<uint8_t> w(wrb * rows), act(arb * n_act);
  for (int64_t r = 0; r < rows; ++r) loom::quant::quantize_row(T::Q5_0, x.data() + r * k, w.data() + r * wrb, k);
  for (int64_t a = 0; a < n_act; ++a) loom::quant::quantize_row(T::Q8_0, x.data() + a * k, act.data() + a * arb, k);
  gguf::TensorInfo info;
  info.dims = {uint64_t(k), uint64_t(rows)};
  info.type = T::Q5_0;
  info.data = w.data();
  backend::cpu::fast::RepackedWeight rw;
  ASSERT_TRUE(backend::cpu::fast::repack_for_gemm_size(info, rw));
  ASSERT_EQ(rw.type, T::Q8_0);
  ASSERT_EQ(rw.bytes, arb * size_t(rows));
  // In two uneven pieces, as threads split it.
  std::vector<uint8_t> packed(rw.bytes);
  const int64_t nb = backend::cpu::fast::repack_blocks(info);
  backend::cpu::fast::repack_for_gemm(info, 0, nb / 3, packed.data());
  backend::cpu::fast::repack_for_gemm(info, nb / 3, nb, packed.data());
  for (simd::Isa l : {simd::Isa::scalar, simd::Isa::avx2, simd::Isa::avx512}) {
    if (l > simd::best_isa()) continue;
    simd::force_isa(l);
    std::vector<float> stored(size_t(rows * n_act)), copy(size_t(rows * n_act));
    simd::gemm(T::Q5_0, w.data(), wrb, rows, act.data(), arb, n_act, stored.data(), size_t(rows), k);
    simd::gemm(T::Q8_0, packed.data(), arb, rows, act.data(), arb, n_act, copy.data(), size_t(rows), k);
    expect_identical(stored, copy, rows, simd::isa_name());
  }
  simd::force_isa(saved);
}
