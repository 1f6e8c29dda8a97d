// The fast backend's attention kernels (attention_kernels.h) at the SIMD level this build runs
// against their scalar references, and the softmax pieces of vec_math.h against std::exp and
// exact sums, on fresh random inputs: head widths 32-256, 1 to 64 query heads per kv head (a
// decode token's GQA group up to a 16-row prefill block of them), runs of keys that are not a
// multiple of any tile, f32 / f16 / q8_0 cached rows, per-head key ranges (the causal edge of a
// prefill block). Tolerances are the contracts written in attention_kernels.h (γ_n bounds of an
// fp32 sum in any order) and vec_math.h (exp's relative error), not what the code happens to
// reach. Also the property batch invariance stands on: a head's scores and sums are the same
// bits whichever other heads and keys share the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/fast/attention_kernels.h"
#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/vec_math.h"
#include "quant/fp16.h"

namespace loom::backend::cpu::fast {
namespace {

uint64_t fresh_seed() { return std::random_device{}() | (uint64_t(std::random_device{}()) << 32); }

constexpr double kU = 1.0 / (1 << 24);  // unit roundoff of fp32
double gamma(int64_t n) { return double(n) * kU / (1.0 - double(n) * kU); }

// `count` cached rows of `width` elements of type e, each `extra` heads wide so that a call's
// head sits inside a wider row (stride > the head's bytes, as in the cache); the head read is
// the first. f32 copies of what the rows hold (conversions are exact) come back in `exact`.
struct Rows {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;  // [count][width]
  size_t stride = 0;
};

Rows random_rows(std::mt19937_64& rng, KvElem e, int64_t count, int64_t width, float scale) {
  Rows r;
  const int64_t heads = 2;
  r.stride = kv_row_bytes(e, heads * width);
  r.bytes.resize(r.stride * size_t(count) + 64);
  r.exact.resize(size_t(count * width));
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> src(size_t(heads * width));
  for (int64_t i = 0; i < count; ++i) {
    for (auto& x : src) x = nd(rng);
    store_kv_row(e, src.data(), r.bytes.data() + size_t(i) * r.stride, heads * width);
    kv_row_to_f32(e, r.bytes.data() + size_t(i) * r.stride, r.exact.data() + i * width, width);
  }
  return r;
}

std::vector<float> normal(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

const char* name(KvElem e) { return kv_elem_name(e); }

struct Shape {
  int64_t hd, heads, count;
};

// Heads: every count the AVX2 score tiles specialize (1-4: a decode step's GQA group, read
// in registers; 5+: tiles of 6, 4, 2 and 1 heads over converted keys), a 16-row prefill block
// of GQA 2 (32) and 3 (48), and 64. Counts: partial and whole key tiles (6, 4, 2 and 16 keys)
// and a whole 256-position chunk, the run a decode task hands the kernels at depth.
std::vector<Shape> shapes() {
  std::vector<Shape> s;
  for (int64_t hd : {32, 64, 128, 256})
    for (int64_t heads : {1, 2, 3, 4, 5, 7, 32, 48, 64})
      for (int64_t count : {1, 5, 16, 31, 32, 33, 77}) s.push_back({hd, heads, count});
  for (int64_t heads : {2, 3}) s.push_back({128, heads, 256});  // qwen3-0.6b / 135M decode at a chunk
  s.push_back({64, 3, 256});
  return s;
}

TEST(AttentionKernels, ScoresMatchScalarWithinDotProductBound) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (KvElem e : {KvElem::f32, KvElem::f16, KvElem::q8_0})
    for (const Shape& sh : shapes()) {
      const Rows k = random_rows(rng, e, sh.count, sh.hd, 1.0f);
      const auto q = normal(rng, size_t(sh.heads * sh.hd), 0.5f);
      const int64_t ld = sh.count + 3;
      std::vector<float> got(static_cast<size_t>(sh.heads * ld), -7.f), ref(got), row(static_cast<size_t>(sh.hd));
      // Odd runs with the attention scale folded in (a power of two: exact, so the bound scales).
      const float scale = sh.count % 2 ? 0.125f : 1.f;
      const AttentionGeometry G{e, sh.hd, sh.hd, sh.heads, k.stride, k.stride, scale};
      scores_run(G, q.data(), k.bytes.data(), k.stride, sh.count, got.data(), ld, row.data());
      scores_scalar(G, q.data(), k.bytes.data(), k.stride, sh.count, ref.data(), ld, row.data());
      for (int64_t h = 0; h < sh.heads; ++h)
        for (int64_t i = 0; i < ld; ++i) {
          const size_t at = size_t(h * ld + i);
          if (i >= sh.count) {  // past the run: untouched
            ASSERT_EQ(got[at], -7.f) << name(e) << " hd " << sh.hd << " heads " << sh.heads << " count " << sh.count;
            continue;
          }
          double mag = 0;
          for (int64_t d = 0; d < sh.hd; ++d) mag += std::fabs(double(q[size_t(h * sh.hd + d)]) * k.exact[size_t(i * sh.hd + d)]);
          ASSERT_LE(std::fabs(double(got[at]) - ref[at]), 2 * gamma(sh.hd) * mag * scale)
              << name(e) << " hd " << sh.hd << " heads " << sh.heads << " count " << sh.count << " head " << h
              << " key " << i << " seed " << seed;
        }
    }
}

TEST(AttentionKernels, ValuesMatchScalarWithinSumBoundAndRespectRanges) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uw(0.f, 1.f);
  for (KvElem e : {KvElem::f32, KvElem::f16, KvElem::q8_0})
    for (const Shape& sh : shapes()) {
      const int64_t vd = sh.hd;
      const Rows v = random_rows(rng, e, sh.count, vd, 2.0f);
      const int64_t ld = sh.count + 1;
      std::vector<float> w(static_cast<size_t>(sh.heads * ld));
      for (auto& x : w) x = uw(rng);
      // Ranges: mostly the whole run, some a causal prefix, some a suffix, some empty.
      std::vector<int32_t> from(static_cast<size_t>(sh.heads)), to(static_cast<size_t>(sh.heads));
      std::uniform_int_distribution<int32_t> pos(0, int32_t(sh.count));
      for (int64_t h = 0; h < sh.heads; ++h) {
        const int kind = int(rng() % 4);
        from[size_t(h)] = kind == 2 ? pos(rng) : 0;
        to[size_t(h)] = kind == 1 ? pos(rng) : kind == 3 ? from[size_t(h)] : int32_t(sh.count);
        if (kind == 0 && h % 5 == 4) from[size_t(h)] = to[size_t(h)] = 0;
      }
      const auto acc0 = normal(rng, size_t(sh.heads * vd), 1.0f);
      std::vector<float> got(acc0), ref(acc0), row(static_cast<size_t>(vd));
      const AttentionGeometry G{e, sh.hd, vd, sh.heads, v.stride, v.stride};
      values_run(G, v.bytes.data(), v.stride, sh.count, w.data(), ld, got.data(), row.data(), {from.data(), to.data()});
      values_scalar(G, v.bytes.data(), v.stride, sh.count, w.data(), ld, ref.data(), row.data(), {from.data(), to.data()});
      for (int64_t h = 0; h < sh.heads; ++h) {
        const int64_t n = to[size_t(h)] - from[size_t(h)];
        for (int64_t c = 0; c < vd; ++c) {
          const size_t at = size_t(h * vd + c);
          if (n <= 0) {  // no active key: untouched, bit for bit
            ASSERT_EQ(got[at], acc0[at]) << name(e) << " head " << h << " seed " << seed;
            continue;
          }
          double mag = std::fabs(double(acc0[at]));
          for (int64_t i = from[size_t(h)]; i < to[size_t(h)]; ++i)
            mag += std::fabs(double(w[size_t(h * ld + i)]) * v.exact[size_t(i * vd + c)]);
          ASSERT_LE(std::fabs(double(got[at]) - ref[at]), 2 * gamma(n + 1) * mag)
              << name(e) << " vd " << vd << " heads " << sh.heads << " count " << sh.count << " head " << h << " col "
              << c << " range [" << from[size_t(h)] << ", " << to[size_t(h)] << ") seed " << seed;
        }
      }
    }
}

// An infinite value row outside every head's range changes nothing: masked keys are left out
// of the sums, never added as 0 · v (which would be NaN).
TEST(AttentionKernels, ValuesIgnoreKeysOutsideRanges) {
  std::mt19937_64 rng(fresh_seed());
  for (int64_t heads : {1, 3, 48}) {
    const int64_t vd = 64, count = 40;
    Rows v = random_rows(rng, KvElem::f32, count, vd, 1.0f);
    std::vector<float> w(static_cast<size_t>(heads * count), 0.5f);
    std::vector<int32_t> from(static_cast<size_t>(heads), 0), to(static_cast<size_t>(heads), int32_t(count - 1));
    std::vector<float> clean(static_cast<size_t>(heads * vd), 0.f), dirty(clean), row(static_cast<size_t>(vd));
    const AttentionGeometry G{KvElem::f32, vd, vd, heads, v.stride, v.stride};
    values_run(G, v.bytes.data(), v.stride, count, w.data(), count, clean.data(), row.data(), {from.data(), to.data()});
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < vd; ++c) std::memcpy(v.bytes.data() + size_t(count - 1) * v.stride + size_t(c) * 4, &inf, 4);
    values_run(G, v.bytes.data(), v.stride, count, w.data(), count, dirty.data(), row.data(), {from.data(), to.data()});
    ASSERT_EQ(0, std::memcmp(clean.data(), dirty.data(), clean.size() * sizeof(float))) << "heads " << heads;
  }
}

// A head's scores and sums do not depend on the other heads of the call or on where the run
// of keys is cut: the property that makes a row's attention the same bits in a 1-row decode
// step and in a 16-row prefill block.
TEST(AttentionKernels, HeadResultsDoNotDependOnTheirCompany) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (KvElem e : {KvElem::f32, KvElem::f16, KvElem::q8_0})
    for (int64_t hd : {64, 128}) {
      const int64_t heads = 48, count = 77, cut = 29;
      const Rows k = random_rows(rng, e, count, hd, 1.0f);
      const auto q = normal(rng, size_t(heads * hd), 0.5f);
      const AttentionGeometry G{e, hd, hd, heads, k.stride, k.stride};
      std::vector<float> all(static_cast<size_t>(heads * count)), one(static_cast<size_t>(count)), row(static_cast<size_t>(hd));
      scores_run(G, q.data(), k.bytes.data(), k.stride, count, all.data(), count, row.data());
      // Alone (a decode step of MHA) and in the GQA groups of decode steps (2-4 heads, the
      // kernels' in-register tiles), over the run cut in two: the same bits as among 48.
      for (int64_t n : {1, 2, 3, 4}) {
        AttentionGeometry Gn = G;
        Gn.heads = n;
        std::vector<float> few(static_cast<size_t>(n * count));
        for (int64_t h = 0; h + n <= heads; h += 7) {
          scores_run(Gn, q.data() + h * hd, k.bytes.data(), k.stride, cut, few.data(), count, row.data());
          scores_run(Gn, q.data() + h * hd, k.bytes.data() + size_t(cut) * k.stride, k.stride, count - cut,
                     few.data() + cut, count, row.data());
          ASSERT_EQ(0, std::memcmp(few.data(), all.data() + h * count, size_t(n * count) * sizeof(float)))
              << name(e) << " hd " << hd << " heads " << h << ".." << h + n - 1 << " seed " << seed;
        }
      }
      AttentionGeometry G1 = G;
      G1.heads = 1;
      // Values: head h alone, over its range in two calls, equals head h among 48.
      std::vector<float> w(static_cast<size_t>(heads * count));
      for (auto& x : w) x = float(rng() % 1000) / 1000.f;
      std::vector<int32_t> from(static_cast<size_t>(heads), 0), to(static_cast<size_t>(heads));
      for (int64_t h = 0; h < heads; ++h) to[size_t(h)] = int32_t(count - h % 16);
      std::vector<float> acc(static_cast<size_t>(heads * hd), 0.f), solo(static_cast<size_t>(hd));
      values_run(G, k.bytes.data(), k.stride, count, w.data(), count, acc.data(), row.data(), {from.data(), to.data()});
      for (int64_t h = 0; h < heads; h += 5) {
        std::fill(solo.begin(), solo.end(), 0.f);
        int32_t f = 0, t = std::min<int32_t>(cut, to[size_t(h)]);
        values_run(G1, k.bytes.data(), k.stride, cut, w.data() + h * count, count, solo.data(), row.data(), {&f, &t});
        f = 0, t = to[size_t(h)] - int32_t(cut);
        values_run(G1, k.bytes.data() + size_t(cut) * k.stride, k.stride, count - cut, w.data() + h * count + cut, count,
                   solo.data(), row.data(), {&f, &t});
        ASSERT_EQ(0, std::memcmp(solo.data(), acc.data() + h * hd, size_t(hd) * sizeof(float)))
            << name(e) << " hd " << hd << " head " << h << " seed " << seed;
      }
    }
}

// A decode tile over whole cached rows (scores_rows / values_rows): every kv head's results
// are the bits scores_run / values_run give for that kv head alone, and within the contract of
// the scalar references. Rows of 8 kv heads (the qwen3-0.6b shape: 128 wide, GQA 2; the 135M
// shape: 64 wide, GQA 3; GQA 1 and 4), a task's share of them starting at a kv head > 0, tiles
// of the sizes a decode walk hands over (a whole tile of 8, tails of 1-7, a 32-position block).
TEST(AttentionKernels, DecodeTilesEqualPerHeadCallsAndScalar) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uw(0.f, 1.f);
  const int64_t n_kv = 8;
  struct Case {
    int64_t hd, group;
  };
  for (KvElem e : {KvElem::f32, KvElem::f16, KvElem::q8_0})
    for (const Case cs : {Case{128, 2}, Case{64, 3}, Case{64, 4}, Case{128, 1}, Case{256, 2}})
      for (int64_t count : {1, 3, 8, 13, 32})
        for (int64_t g0 : {0, 3}) {
          const int64_t kvh = n_kv - g0, hd = cs.hd, heads = cs.group;
          const size_t stride = kv_row_bytes(e, n_kv * hd), head_bytes = kv_row_bytes(e, hd);
          std::vector<uint8_t> bytes(stride * size_t(count) + 64);
          std::vector<float> exact(size_t(count * n_kv * hd)), src(size_t(n_kv * hd));
          for (int64_t i = 0; i < count; ++i) {
            for (auto& x : src) x = std::normal_distribution<float>(0.f, 1.f)(rng);
            store_kv_row(e, src.data(), bytes.data() + size_t(i) * stride, n_kv * hd);
            kv_row_to_f32(e, bytes.data() + size_t(i) * stride, exact.data() + i * n_kv * hd, n_kv * hd);
          }
          const uint8_t* rows = bytes.data() + size_t(g0) * head_bytes;
          const auto q = normal(rng, size_t(kvh * heads * hd), 0.5f);
          const int64_t ld = count + 2;
          const float scale = 0.125f;
          const AttentionGeometry G{e, hd, hd, heads, stride, stride, scale};
          std::vector<float> row(static_cast<size_t>(hd));
          const std::string what = std::string(name(e)) + " hd " + std::to_string(hd) + " group " + std::to_string(heads) +
                                   " count " + std::to_string(count) + " from kv head " + std::to_string(g0) +
                                   " seed " + std::to_string(seed);
          // Scores.
          std::vector<float> got(static_cast<size_t>(kvh * heads * ld), -7.f), alone(got), ref(got);
          scores_rows(G, kvh, q.data(), rows, stride, count, got.data(), ld, row.data());
          for (int64_t g = 0; g < kvh; ++g) {
            scores_run(G, q.data() + g * heads * hd, rows + size_t(g) * head_bytes, stride, count,
                       alone.data() + g * heads * ld, ld, row.data());
            scores_scalar(G, q.data() + g * heads * hd, rows + size_t(g) * head_bytes, stride, count,
                          ref.data() + g * heads * ld, ld, row.data());
          }
          ASSERT_EQ(0, std::memcmp(got.data(), alone.data(), got.size() * sizeof(float))) << "scores " << what;
          for (int64_t g = 0; g < kvh; ++g)
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t i = 0; i < count; ++i) {
                double mag = 0;
                for (int64_t d = 0; d < hd; ++d)
                  mag += std::fabs(double(q[size_t((g * heads + h) * hd + d)]) * exact[size_t((i * n_kv + g0 + g) * hd + d)]);
                const size_t at = size_t((g * heads + h) * ld + i);
                ASSERT_LE(std::fabs(double(got[at]) - ref[at]), 2 * gamma(hd) * mag * scale) << "scores " << what;
              }
          // Values: every head over one range (a decode token), then a causal edge (rows of a
          // speculative block: heads of different ranges, the per-head path).
          std::vector<float> w(static_cast<size_t>(kvh * heads * ld));
          for (auto& x : w) x = uw(rng);
          const int64_t acc_stride = heads * hd + 5;  // partials of one pair lie apart from the next's
          for (bool causal : {false, true}) {
            std::vector<int32_t> from(static_cast<size_t>(heads), 0), to(static_cast<size_t>(heads), int32_t(count));
            if (causal)
              for (int64_t h = 0; h < heads; ++h) to[size_t(h)] = int32_t(std::max<int64_t>(0, count - h));
            const auto acc0 = normal(rng, size_t(kvh * acc_stride), 1.0f);
            std::vector<float> vgot(acc0), valone(acc0), vref(acc0);
            values_rows(G, kvh, rows, stride, count, w.data(), ld, vgot.data(), acc_stride, row.data(), {from.data(), to.data()});
            for (int64_t g = 0; g < kvh; ++g) {
              values_run(G, rows + size_t(g) * head_bytes, stride, count, w.data() + g * heads * ld, ld,
                         valone.data() + g * acc_stride, row.data(), {from.data(), to.data()});
              values_scalar(G, rows + size_t(g) * head_bytes, stride, count, w.data() + g * heads * ld, ld,
                            vref.data() + g * acc_stride, row.data(), {from.data(), to.data()});
            }
            ASSERT_EQ(0, std::memcmp(vgot.data(), valone.data(), vgot.size() * sizeof(float))) << "values " << what;
            for (int64_t g = 0; g < kvh; ++g)
              for (int64_t h = 0; h < heads; ++h)
                for (int64_t c = 0; c < hd; ++c) {
                  const size_t at = size_t(g * acc_stride + h * hd + c);
                  double mag = std::fabs(double(acc0[at]));
                  for (int64_t i = from[size_t(h)]; i < to[size_t(h)]; ++i)
                    mag += std::fabs(double(w[size_t((g * heads + h) * ld + i)]) * exact[size_t((i * n_kv + g0 + g) * hd + c)]);
                  ASSERT_LE(std::fabs(double(vgot[at]) - vref[at]), 2 * gamma(to[size_t(h)] - from[size_t(h)] + 1) * mag)
                      << "values " << what << " causal " << causal;
                }
          }
        }
}

// vec_math.h: the vector exp's relative error is within the 2e-7 its comment states, across
// its domain; the softmax pieces built on it within that plus their sums' γ_n.
constexpr double kExpRel = 2e-7;

TEST(SoftmaxPieces, RowMaxIsExact) {
  std::mt19937_64 rng(fresh_seed());
  for (int64_t n : {1, 7, 8, 9, 100, 1000}) {
    const auto s = normal(rng, size_t(n), 10.f);
    EXPECT_EQ(row_max(s.data(), n), *std::max_element(s.begin(), s.end())) << n;
  }
}

TEST(SoftmaxPieces, ScaleMaxIsExact) {
  std::mt19937_64 rng(fresh_seed());
  for (int64_t n : {1, 7, 8, 9, 100, 1000}) {
    auto s = normal(rng, size_t(n), 10.f), ref = s;
    const float scale = 0.125f + float(rng() % 100) / 300.f;
    const float mx = scale_max(s.data(), n, scale);
    float want = -INFINITY;
    for (auto& x : ref) x *= scale, want = std::max(want, x);
    EXPECT_EQ(mx, want) << n;
    ASSERT_EQ(0, std::memcmp(s.data(), ref.data(), s.size() * sizeof(float))) << n;
  }
}

TEST(SoftmaxPieces, ExpStoreSumAndWeightsWithinContract) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t n : {1, 3, 8, 13, 64, 257, 4099}) {
    const auto s = normal(rng, size_t(n), 6.f);
    float mx = -INFINITY;
    for (float x : s) mx = std::max(mx, x);
    auto p = s;
    const double got = exp_store_sum(p.data(), n, mx);
    double want = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double e = std::exp(double(s[size_t(j)] - mx));  // of the fp32 argument the kernel takes
      want += e;
      ASSERT_LE(std::fabs(double(p[size_t(j)]) - e), kExpRel * e) << "n " << n << " j " << j << " seed " << seed;
    }
    ASSERT_LE(std::fabs(got - want), (kExpRel + gamma(n)) * want) << "n " << n << " seed " << seed;
    for (bool f16 : {false, true}) {
      auto w = p;
      const float f = float(1.0 / want);
      scale_weights(w.data(), n, f, f16);
      for (int64_t j = 0; j < n; ++j) {
        const double exact = double(p[size_t(j)]) * double(f);
        // The product's rounding and (f16) the rounding to 11 significant bits, whose spacing
        // below 2^-14 is 2^-24 (half of it absolute).
        const double tol = f16 ? exact / 2048 + 0x1p-25 : kU * exact;
        ASSERT_LE(std::fabs(double(w[size_t(j)]) - exact), tol) << "n " << n << " j " << j << " f16 " << f16 << " seed " << seed;
      }
    }
  }
}

TEST(SoftmaxPieces, VectorExpWithinStatedRelativeError) {
#if defined(__AVX512F__) || defined(__AVX2__)
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> ux(-87.0f, 88.0f);
  std::vector<float> xs = {0.f, -0.f, 1.f, -1.f, 0.5f, -0.5f, 0.34657359f, -87.0f, 88.0f, 1e-8f, -1e-8f};
  for (int i = 0; i < 200000; ++i) xs.push_back(ux(rng));
  while (xs.size() % 16) xs.push_back(0.f);
  for (size_t i = 0; i < xs.size(); i += 16) {
    alignas(64) float y[16];
#if defined(__AVX512F__)
    _mm512_store_ps(y, exp512(_mm512_loadu_ps(xs.data() + i)));
#else
    _mm256_store_ps(y, exp256(_mm256_loadu_ps(xs.data() + i)));
    _mm256_store_ps(y + 8, exp256(_mm256_loadu_ps(xs.data() + i + 8)));
#endif
    for (int l = 0; l < 16; ++l) {
      const double want = std::exp(double(xs[i + size_t(l)]));
      ASSERT_LE(std::fabs(double(y[l]) - want), kExpRel * want) << "x " << xs[i + size_t(l)] << " seed " << seed;
    }
  }
#else
  GTEST_SKIP() << "this build has no vector exp (the scalar softmax uses std::exp)";
#endif
}

// round_f16 (the queries met by an f16 cache) is round-to-nearest-even to f16, bit for bit as
// the scalar conversion, at every vector width and in the tail.
TEST(VecMath, RoundF16MatchesScalarRounding) {
  std::mt19937_64 rng(fresh_seed());
  for (int64_t n : {1, 7, 8, 9, 64, 67}) {
    auto x = normal(rng, size_t(n), 3.f);
    x[0] = 65520.f;  // rounds up to infinity
    if (n > 1) x[1] = 1e-7f;  // an f16 subnormal
    auto ref = x;
    for (auto& v : ref) v = loom::quant::round_to_fp16(v);
    round_f16(x.data(), n);
    ASSERT_EQ(0, std::memcmp(x.data(), ref.data(), x.size() * sizeof(float))) << n;
  }
}

// swiglu_row: silu(g)·u with the vector exp, within exp's relative error plus the four
// roundings (negation-free add, divide, multiply, and the reference's) of the exact value.
TEST(VecMath, SwigluWithinContract) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t n : {1, 8, 13, 576, 1536}) {
    const auto g = normal(rng, size_t(n), 4.f), u = normal(rng, size_t(n), 1.f);
    std::vector<float> o(static_cast<size_t>(n));
    swiglu_row(g.data(), u.data(), o.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[size_t(i)], exact = x / (1.0 + std::exp(-x)) * double(u[size_t(i)]);
      ASSERT_LE(std::fabs(double(o[size_t(i)]) - exact), (kExpRel + 4 * kU) * std::fabs(exact))
          << "x " << x << " n " << n << " seed " << seed;
    }
  }
}

// The RMS norm's pieces: sum_squares adds the fp32 squares (each rounded as the scalar loop
// rounds it) in double, in lanes, so it is within the double sum's γ_n of the exact sum of
// those squares; scale_mul_row is (x·s)·w per element, bit for bit as the scalar loop.
TEST(VecMath, NormPiecesMatchScalar) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t n : {1, 7, 8, 9, 64, 128, 1027}) {
    const auto x = normal(rng, size_t(n), 3.f), w = normal(rng, size_t(n), 1.f);
    long double exact = 0;
    for (float v : x) exact += (long double)(v * v);
    const double du = std::ldexp(1.0, -53);
    ASSERT_LE(std::fabs(double(sum_squares(x.data(), n) - exact)), double(n) * du / (1 - double(n) * du) * double(exact) * 1.01)
        << "n " << n << " seed " << seed;
    const float sc = 0.37f;
    std::vector<float> got(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    scale_mul_row(x.data(), sc, w.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ref[size_t(i)] = x[size_t(i)] * sc * w[size_t(i)];
    ASSERT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * sizeof(float))) << "n " << n << " seed " << seed;
  }
}

}  // namespace
}  // namespace loom::backend::cpu::fast
