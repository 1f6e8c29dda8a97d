// The fast CPU backend against the reference interpreter, logits row by row; every comparison
// prints its figures (max over rows of max |Δlogit| / std(reference row), argmax agreement).
//
// The bounds are the agreement the two backends reach now, measured, with a stated margin
// (issue 10, D.2). Where the figures come from: this test's own printed figures, on an AVX-512
// VNNI Xeon, once with the fast backend's AVX-512 kernels and once capped to AVX2 (measured
// with LOOM_ISA=avx2, now the schedule key isa = "avx2"), which sum in different orders; the bound
// takes the worse of the two. Rules:
// a maximum (max|Δlogit|, max|Δlogit|/std) may grow by 1.5x, a mean KL by 1.3x (a mean over
// hundreds of rows moves less than a maximum), and an argmax/top-1 rate may fall by two
// standard errors of the measured rate, sqrt(p (1 - p) / rows) (with p = 1: the rule of three,
// 3 / rows). A change to either backend's arithmetic that moves past them is a change in what
// the backends promise and must come with new measurements here, not a looser number.
//
// Why they differ at all. F32 weights: activations stay f32 on both sides, so only summation
// order differs. Quantized weights: both sides quantize activations to the weight type's
// vec_dot_type (Q8_0/Q8_1/Q8_K) as llama.cpp does and take the same integer block sums; only
// the order of the per-block float updates differs (the reference follows llama.cpp's x86
// orders, the fast kernels their own SIMD lanes). Most rows agree bit for bit; where a 1-ulp
// difference moves a value across a rounding boundary of the next activation quantization it
// grows through the layers; random weights also give near-ties for the argmax.
//
// Measured (rows; AVX-512 / AVX2):
//  - F32 tiny models, 4 configurations pooled (336 rows): max|Δ|/std 4.3e-4 / 4.3e-4, argmax
//    100% / 100%. Bound: max|Δ|/std <= 6.5e-4, argmax >= 99% (3/336 by the rule of three).
//  - quantized llama-shaped, 7 weight types, and the gemma-shaped SWA + softcap model, 90 rows
//    each: worst max|Δ|/std 0.0586 (Q4_1) / 0.0529 (Q4_1); worst argmax 97.8% (Q4_K) / 96.7%
//    (Q6_K). Bound: max|Δ|/std <= 0.088, argmax >= 92.9% (0.967 - 2 x 0.019) per model.
//  - SmolLM2-135M Q4_1, Gemma-3-270M Q4_K_M (the real models; the first 64 tokens of three
//    licence texts of tests/data/text as one prefill with every row's logits, then 16 decode
//    steps each, plus a 7-token prefill + 4 decodes: 251 rows):
//      SmolLM2: max|Δlogit| 2.046 / 1.881, mean KL 0.00489 / 0.00445, top-1 96.4% / 97.2%;
//      Gemma-3: max|Δlogit| 4.441 / 2.983, mean KL 0.00723 / 0.00600, top-1 96.0% / 95.2%.
//    Bounds: SmolLM2 max|Δlogit| <= 3.07, mean KL <= 0.0064, top-1 >= 94.0% (0.964 - 2 x 0.0117);
//            Gemma-3 max|Δlogit| <= 6.66, mean KL <= 0.0094, top-1 >= 92.5% (0.952 - 2 x 0.0135).
//    (tests/python/test_correctness.py holds both backends to llama.cpp itself; the reference's
//    logits there equal llama.cpp's, so these are also the fast backend's distance from it.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../backend/tiny_model.h"
#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/reference.h"
#include "backend/registry.h"
#include "common/error.h"
#include "../backend/kv_fixture.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "support/real_models.h"
#include "synthetic_program.h"
#include "text/tokenizer.h"

using namespace loom;

namespace {

struct Bounds {
  double max_rel, min_argmax;
};
constexpr Bounds kF32{6.5e-4, 0.99}, kQuantized{0.088, 0.929};
struct RealBounds {
  double max_abs_dlogit, max_mean_kl, min_top1;
};
constexpr RealBounds kRealSmolLM2{3.07, 0.0064, 0.940}, kRealGemma3{6.66, 0.0094, 0.925};

struct Pair {
  std::unique_ptr<backend::Plan> fast, ref;
};

Pair compile_both(const ir::Module& m, const gguf::File& f, int threads = 2) {
  auto ws = backend::WeightSource::bind(m, f);
  return {backend::cpu::make_fast_backend()->compile(m, ws, {threads}),
          backend::cpu::make_reference_backend()->compile(m, ws, {threads})};
}

loom::testing::TestKv cache_for(const backend::Plan& p, int seqs = 1, backend::KvElem e = backend::KvElem::f16) {
  return loom::testing::TestKv(p, e, 1024, seqs, 16);
}

struct Agreement {
  double worst = 0;    // max over rows of max|Δ| / std(ref)
  double max_abs = 0;  // max over rows of max|Δlogit|
  double kl_sum = 0;  // Σ over rows of KL(ref || fast)
  int64_t rows = 0, same_argmax = 0;
};

void accumulate(Agreement& a, const float* ref, const float* got, int64_t rows, int64_t V) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = ref + r * V;
    const float* y = got + r * V;
    double mean = 0, var = 0, md = 0;
    for (int64_t i = 0; i < V; ++i) mean += x[i];
    mean /= double(V);
    for (int64_t i = 0; i < V; ++i) {
      var += (x[i] - mean) * (x[i] - mean);
      md = std::max(md, double(std::fabs(x[i] - y[i])));
    }
    a.worst = std::max(a.worst, md / std::sqrt(var / double(V)));
    a.max_abs = std::max(a.max_abs, md);
    const double mx = *std::max_element(x, x + V), my = *std::max_element(y, y + V);
    double zx = 0, zy = 0;
    for (int64_t i = 0; i < V; ++i) zx += std::exp(x[i] - mx), zy += std::exp(y[i] - my);
    for (int64_t i = 0; i < V; ++i) {
      const double lp = x[i] - mx - std::log(zx), lq = y[i] - my - std::log(zy);
      a.kl_sum += std::exp(lp) * (lp - lq);
    }
    a.same_argmax += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
    ++a.rows;
  }
}

double agreement(const Agreement& a) { return double(a.same_argmax) / double(std::max<int64_t>(1, a.rows)); }
double mean_kl(const Agreement& a) { return a.kl_sum / double(std::max<int64_t>(1, a.rows)); }

void print(const Agreement& a, const std::string& what) {
  std::printf("[ figures  ] %-44s rows %4lld  max|dlogit| %.4g  max|dlogit|/std %.4g  argmax agreement %.4f  mean KL %.4g\n",
              what.c_str(), (long long)a.rows, a.max_abs, a.worst, agreement(a), mean_kl(a));
}

void merge(Agreement& into, const Agreement& a) {
  into.worst = std::max(into.worst, a.worst);
  into.max_abs = std::max(into.max_abs, a.max_abs);
  into.kl_sum += a.kl_sum;
  into.rows += a.rows;
  into.same_argmax += a.same_argmax;
}

// Checks the bounds; `total` (when given) collects the rows so that argmax agreement, a rate,
// is judged over all cases of one model rather than over 7 rows at a time.
void expect_agree(const Agreement& a, const std::string& what, Bounds b = kQuantized, Agreement* total = nullptr) {
  print(a, what);
  EXPECT_LE(a.worst, b.max_rel) << what;
  if (total) merge(*total, a);
  else EXPECT_GE(agreement(a), b.min_argmax) << what;
}

std::vector<int32_t> tokens(int n, int vocab, unsigned seed) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = int32_t((seed * 2654435761u + i * 40503u + (i * i) * 7u) % unsigned(vocab));
  return t;
}

// Prefill of the first T tokens with every row's logits, then the rest as single-token steps.
Agreement prefill_then_decode(const Pair& p, const std::vector<int32_t>& prompt, int T,
                              backend::KvElem elem = backend::KvElem::f16) {
  const int64_t V = p.fast->vocab_size();
  const int decode = int(prompt.size()) - T;
  auto kf = cache_for(*p.fast, 1, elem), kr = cache_for(*p.ref, 1, elem);
  std::vector<int32_t> first(prompt.begin(), prompt.begin() + T);
  std::vector<float> a(size_t(T) * V), b(size_t(T) * V);
  Agreement ag;
  kf.run(*p.fast, backend::StepBatch::sequence(first, 0, true), a.data());
  kr.run(*p.ref, backend::StepBatch::sequence(first, 0, true), b.data());
  accumulate(ag, b.data(), a.data(), T, V);
  for (int i = 0; i < decode; ++i) {
    kf.run(*p.fast, backend::StepBatch::sequence({prompt[T + i]}, T + i), a.data());
    kr.run(*p.ref, backend::StepBatch::sequence({prompt[T + i]}, T + i), b.data());
    accumulate(ag, b.data(), a.data(), 1, V);
  }
  return ag;
}

Agreement prefill_then_decode(const Pair& p, int T, int decode, int vocab, unsigned seed,
                              backend::KvElem elem = backend::KvElem::f16) {
  return prefill_then_decode(p, tokens(T + decode, vocab, seed), T, elem);
}

loom::testing::SyntheticSpec spec_with(auto f) {
  loom::testing::SyntheticSpec s;
  f(s);
  return s;
}

}  // namespace

TEST(FastBackend, TinyF32ModelMatchesReference) {
  Agreement total;
  for (std::string mode : {"normal", "neox"})
    for (int64_t window : {0, 3}) {
      auto tm = loom::testing::make_tiny_model(mode, window);
      auto p = compile_both(tm.module, *tm.file);
      for (int T : {1, 7, 64})
        expect_agree(prefill_then_decode(p, T, 4, loom::testing::TinyModel::V, T),
                     "tiny f32 " + mode + " window " + std::to_string(window) + " T " + std::to_string(T), kF32, &total);
    }
  expect_agree(total, "tiny f32 all rows", kF32);
}

TEST(FastBackend, QuantizedPrefillAndDecode) {
  // Q4_K, Q6_K, Q8_0, Q5_0, Q4_0, Q4_1 run the x8 packed kernels (quant/simd/packed.h) on
  // AVX-512 and AVX2.
  for (auto wt : {gguf::TensorType::Q4_K, gguf::TensorType::Q4_0, gguf::TensorType::Q4_1, gguf::TensorType::Q5_K,
                  gguf::TensorType::Q6_K, gguf::TensorType::Q8_0, gguf::TensorType::Q5_0}) {
    auto sm = loom::testing::make_synthetic(spec_with([&](auto& s) { s.wtype = wt; }));
    auto p = compile_both(sm.module, *sm.file);
    const std::string name = std::string("llama-shaped ") + std::string(gguf::type_name(wt));
    Agreement total;
    for (int T : {1, 7, 64})
      expect_agree(prefill_then_decode(p, T, 6, sm.spec.V, 11 + T), name + " T " + std::to_string(T), kQuantized, &total);
    expect_agree(total, name + " all rows");
  }
}

TEST(FastBackend, SlidingWindowSoftcapGqaGemmaShape) {
  auto sm = loom::testing::make_synthetic(spec_with([](auto& s) {
    s.gemma = true;
    s.rope_mode = "neox";
    s.window = 5;
    s.attn_softcap = 30.0;
    s.logit_softcap = 20.0;
    s.H = 4;
    s.HKV = 1;
    s.DH = 64;
    s.L = 3;
  }));
  auto p = compile_both(sm.module, *sm.file);
  Agreement total;
  for (int T : {1, 7, 64})
    expect_agree(prefill_then_decode(p, T, 6, sm.spec.V, 3 + T), "gemma-shaped swa+softcap T " + std::to_string(T), kQuantized, &total);
  expect_agree(total, "gemma-shaped swa+softcap all rows");
}

// Decode deep enough that the fast backend splits the KV range into several chunks and merges
// their partial softmaxes (attention_decode.cpp), with f16 and q8_0 caches and the two head
// shapes its kernels are unrolled for (64 wide in groups of 3, 128 wide in groups of 2), and
// short prefills of both (one chunk). Same contract as every quantized-weight comparison.
TEST(FastBackend, DecodeAtDepthSplitsTheKvRange) {
  struct Shape {
    int H, HKV, DH;
  };
  for (auto elem : {backend::KvElem::f16, backend::KvElem::q8_0})
    for (Shape sh : {Shape{12, 4, 64}, Shape{4, 2, 128}}) {
      auto sm = loom::testing::make_synthetic(spec_with([&](auto& s) {
        s.H = sh.H;
        s.HKV = sh.HKV;
        s.DH = sh.DH;
        s.E = sh.H * sh.DH;
      }));
      auto p = compile_both(sm.module, *sm.file);
      const std::string name = std::string(backend::kv_elem_name(elem)) + " KV, " + std::to_string(sh.H) + "x" +
                               std::to_string(sh.DH) + " heads over " + std::to_string(sh.HKV);
      Agreement total;
      for (int T : {1, 9, 300})
        expect_agree(prefill_then_decode(p, T, 5, sm.spec.V, 5 + T, elem), name + " T " + std::to_string(T), kQuantized,
                     &total);
      expect_agree(total, name + " all rows");
    }
}

TEST(FastBackend, TwoSequencesInOneBatch) {
  auto sm = loom::testing::make_synthetic({});
  auto p = compile_both(sm.module, *sm.file);
  const int64_t V = p.fast->vocab_size();
  auto kf = cache_for(*p.fast, 2), kr = cache_for(*p.ref, 2);
  backend::StepBatch b;
  const auto a0 = tokens(9, sm.spec.V, 1), a1 = tokens(5, sm.spec.V, 2);
  for (int i = 0; i < 9; ++i) b.tokens.push_back(a0[i]), b.positions.push_back(i), b.seq_ids.push_back(0), b.want_logits.push_back(i % 2);
  for (int i = 0; i < 5; ++i) b.tokens.push_back(a1[i]), b.positions.push_back(i), b.seq_ids.push_back(1), b.want_logits.push_back(1);
  const size_t rows = b.n_logit_rows();
  std::vector<float> x(rows * V), y(rows * V);
  kf.run(*p.fast, b, x.data());
  kr.run(*p.ref, b, y.data());
  Agreement ag;
  accumulate(ag, y.data(), x.data(), int64_t(rows), V);
  // Each sequence alone on the fast backend gives the same rows as the mixed batch.
  auto k1 = cache_for(*p.fast, 2);
  std::vector<float> alone(5 * V);
  k1.run(*p.fast, backend::StepBatch::sequence(a1, 0, true, 1), alone.data());
  for (int64_t i = 0; i < 5 * V; ++i) ASSERT_NEAR(alone[i], x[(rows - 5) * V + i], 1e-3f) << i;
  // Decode one more token in each sequence in one step.
  backend::StepBatch d;
  d.tokens = {7, 8};
  d.positions = {9, 5};
  d.seq_ids = {0, 1};
  d.want_logits = {1, 1};
  std::vector<float> dx(2 * V), dy(2 * V);
  kf.run(*p.fast, d, dx.data());
  kr.run(*p.ref, d, dy.data());
  accumulate(ag, dy.data(), dx.data(), 2, V);
  expect_agree(ag, "two sequences, mixed wants + decode");
}

TEST(FastBackend, RollbackRedecodesIdentically) {
  auto sm = loom::testing::make_synthetic({});
  auto ws = backend::WeightSource::bind(sm.module, *sm.file);
  runtime::Engine engine(backend::cpu::make_fast_backend()->compile(sm.module, ws, {2}), {.n_ctx = 1024});
  runtime::DirectSequence s(engine);
  auto decode = [&](int32_t tok) { return s.feed(std::span<const int32_t>(&tok, 1)); };
  s.feed(tokens(20, sm.spec.V, 5));
  decode(4);  // a draft token that gets rejected
  decode(6);
  s.rollback(20);
  const auto a = decode(3), a2 = decode(9);
  s.rollback(20);
  const auto b = decode(3), b2 = decode(9);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a2, b2);
}

// Real text, teacher-forced: for each licence text of tests/data/text, a prefill of the
// first 64 tokens with every row's logits, then 16 single-token decode steps; and a short
// 7-token prefill + 4 decodes (low-context positions are the most sensitive).
Agreement real_model_agreement(const std::string& file_name, const std::string& label) {
  const std::string path = loom::testing::real_model(file_name);
  auto model = runtime::load_model(path);
  auto p = compile_both(model.module, *model.file);
  const auto tok = text::Tokenizer::from_gguf(*model.file);
  Agreement total;
  for (const char* text : {"apache-2.0.txt", "artistic.txt", "mpl-2.0.txt"}) {
    std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/tests/data/text/" + text, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const auto ids = tok.encode(ss.str().substr(0, 4000), true, false);
    EXPECT_GE(ids.size(), 80u) << text;
    if (ids.size() < 80) continue;
    const Agreement a = prefill_then_decode(p, std::vector<int32_t>(ids.begin(), ids.begin() + 80), 64);
    print(a, label + " " + text + " 64+16");
    merge(total, a);
    if (std::string(text) == "apache-2.0.txt") {
      const Agreement b = prefill_then_decode(p, std::vector<int32_t>(ids.begin(), ids.begin() + 11), 7);
      print(b, label + " " + text + " 7+4");
      merge(total, b);
    }
  }
  print(total, label + " all rows");
  return total;
}

TEST(FastBackend, RealSmolLM2MatchesReference) {
  LOOM_REQUIRE_MODEL(loom::testing::real_model("SmolLM2-135M-Instruct.Q4_1.gguf"));
  const Agreement a = real_model_agreement("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M Q4_1");
  EXPECT_LE(a.max_abs, kRealSmolLM2.max_abs_dlogit);
  EXPECT_LE(mean_kl(a), kRealSmolLM2.max_mean_kl);
  EXPECT_GE(agreement(a), kRealSmolLM2.min_top1);
}

TEST(FastBackend, RealGemma3MatchesReference) {
  LOOM_REQUIRE_MODEL(loom::testing::real_model("gemma-3-270m-it-Q4_K_M.gguf"));
  const Agreement a = real_model_agreement("gemma-3-270m-it-Q4_K_M.gguf", "Gemma-3-270M Q4_K_M");
  EXPECT_LE(a.max_abs, kRealGemma3.max_abs_dlogit);
  EXPECT_LE(mean_kl(a), kRealGemma3.max_mean_kl);
  EXPECT_GE(agreement(a), kRealGemma3.min_top1);
}

TEST(BackendRegistry, NamesAndErrors) {
  EXPECT_EQ(backend::make_backend("cpu")->name(), "cpu");
  EXPECT_EQ(backend::make_backend("cpu-ref")->name(), "cpu-reference");
  try {
    backend::make_backend("tpu");
    FAIL() << "expected an error";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu-ref"), std::string::npos) << e.what();
  }
}
