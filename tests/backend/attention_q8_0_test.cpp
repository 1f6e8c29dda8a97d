// The reference attention with a q8_0 KV cache against the same attention over an f32 cache,
// on fresh random inputs, within a bound that follows from q8_0's rounding alone:
//  - q8_0 stores x as q·d, d = f16(amax/127) of its 32-element block, q = round(x/d):
//    |x' - x| ≤ d/2 + 127·|f16(d) - d| ≤ (0.5 + 127·2^-11)·amax/127, taken as 0.57·amax/127.
//    Keys, values and (for q·k) the query are all rounded so.
//  - a score moves by at most Δ_j = scale·Σ_i (|q_i|·e_k,i + |k_i|·e_q,i + e_q,i·e_k,i);
//  - weights of a softmax whose inputs move by ≤ Δ move by Σ_j |w'_j - w_j| ≤ e^{2Δ} - 1;
//  - so each output column moves by ≤ max_j|v_j| (e^{2Δ} - 1) + max_j e_v,j, plus fp32
//    rounding of the sums (1e-5 of max|v|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/cpu/reference_kernels.h"
#include "backend/host_kv.h"

using namespace loom;
using namespace loom::backend::cpu;

namespace {

constexpr int64_t kHeads = 6, kKvHeads = 2, kDim = 64, kRows = 300;

// Per-element q8_0 rounding bound of x (blocks of 32).
std::vector<float> q8_error(const float* x, int64_t n) {
  std::vector<float> e(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = b; i < b + 32; ++i) e[size_t(i)] = 0.57f * amax / 127.f;
  }
  return e;
}

// One sequence over 8 blocks of 64 positions, taken from the pool in reverse order so block
// table lookups are exercised.
struct Run {
  ThreadPool pool{2};
  std::vector<backend::KvLayerShape> layers{{int(kKvHeads), int(kDim), int(kDim)}};
  backend::HostKvStorage storage;
  std::vector<int32_t> table{7, 6, 5, 4, 3, 2, 1, 0};
  backend::StepBatch batch;
  explicit Run(backend::KvElem e, int64_t rows) : storage(layers, 8, 64, e) {
    batch = backend::StepBatch::sequence(std::vector<int32_t>(size_t(rows), 0), 0, true);
    batch.block_tables = {table};
  }
};

Tensor attend(backend::KvElem elem, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos, float scale) {
  Run r(elem, q.rows);
  StepContext ctx{r.pool, r.batch, backend::HostKvView::bind(r.storage, r.batch, r.layers)};
  ir::Op op;
  op.result = "r";
  op.opcode = "attention";
  for (int i = 0; i < 4; ++i) op.operands.push_back(ir::Operand::value("v" + std::to_string(i)));
  op.attrs = {{"layer", int64_t(0)}, {"n_head", kHeads},  {"n_kv_head", kKvHeads},
              {"head_dim", kDim},    {"value_dim", kDim}, {"scale", double(scale)}};
  op.type = {{ir::Dim::symbol("T"), ir::Dim::of(kHeads * kDim)}, ir::Elem::f32};
  Tensor out{q.rows, kHeads * kDim, {}, {}};
  std::vector<const Tensor*> in{&q, &k, &v, &pos};
  KernelArgs a{op, in, std::vector<const gguf::TensorInfo*>(4), std::vector<const float*>(4), out, ctx};
  kernel_for(*passes::opcode_of(op.opcode))(a);
  return out;
}

}  // namespace

TEST(AttentionQ8_0, WithinTheBoundOfQ8_0Rounding) {
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto fill = [&](int64_t cols, float sd) {
      Tensor t{kRows, cols, std::vector<float>(size_t(kRows * cols)), {}};
      for (float& x : t.f) x = sd * nd(rng);
      return t;
    };
    const Tensor q = fill(kHeads * kDim, 1.f), k = fill(kKvHeads * kDim, 1.f), v = fill(kKvHeads * kDim, 1.f);
    Tensor pos{kRows, 1, {}, std::vector<int32_t>(size_t(kRows))};
    for (int64_t t = 0; t < kRows; ++t) pos.i[size_t(t)] = int32_t(t);
    const float scale = 1.f / std::sqrt(float(kDim));
    const Tensor exact = attend(backend::KvElem::f32, q, k, v, pos, scale);
    const Tensor got = attend(backend::KvElem::q8_0, q, k, v, pos, scale);
    std::vector<std::vector<float>> ek(kRows), ev(kRows);
    for (int64_t j = 0; j < kRows; ++j) {
      ek[size_t(j)] = q8_error(k.f.data() + j * k.cols, k.cols);
      ev[size_t(j)] = q8_error(v.f.data() + j * v.cols, v.cols);
    }
    double worst_ratio = 0;
    for (int64_t t = 0; t < kRows; t += 7) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        const float* qh = q.f.data() + t * q.cols + h * kDim;
        const std::vector<float> eq = q8_error(qh, kDim);
        double delta = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const float* kj = k.f.data() + j * k.cols + g * kDim;
          const float* ekj = ek[size_t(j)].data() + g * kDim;
          double d = 0;
          for (int64_t i = 0; i < kDim; ++i)
            d += std::fabs(qh[i]) * ekj[i] + std::fabs(kj[i]) * eq[size_t(i)] + eq[size_t(i)] * ekj[i];
          delta = std::max(delta, double(scale) * d);
        }
        for (int64_t c = 0; c < kDim; ++c) {
          double vmax = 0, evmax = 0;
          for (int64_t j = 0; j <= t; ++j) {
            vmax = std::max(vmax, double(std::fabs(v.f[size_t(j * v.cols + g * kDim + c)])));
            evmax = std::max(evmax, double(ev[size_t(j)][size_t(g * kDim + c)]));
          }
          const double bound = vmax * std::expm1(2 * delta) + evmax + 1e-5 * vmax;
          const double err = std::fabs(got.f[size_t(t * got.cols + h * kDim + c)] - exact.f[size_t(t * exact.cols + h * kDim + c)]);
          ASSERT_LE(err, bound) << "seed " << seed << " row " << t << " head " << h << " col " << c;
          worst_ratio = std::max(worst_ratio, err / bound);
        }
      }
    }
    std::printf("[ figures  ] seed %u: worst |q8_0 - f32| / bound %.4f\n", seed, worst_ratio);
  }
}
