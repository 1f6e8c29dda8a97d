// loom-kernel-bench: throughput of quant::simd::gemm per weight type and ISA level, one thread.
//
//   gemv/<type>/<isa>/<rows>x<k>      n_act = 1 (decode), 2048x8192 and 576x1536. Weights rotate through a pool of
//                                     >= 256 MiB of copies so every call streams from DRAM, as a
//                                     real decode step does; "bytes_per_second" is weight bytes.
//   gemm/<type>/<isa>/<rows>x<k>/<n>  n_act = n activation rows (prefill), weights hot in cache.
//                                     GFLOPs = 2*rows*k*n per call; tok/s = n per call's time.
//
// Activations are quantized once outside the timed loop (their cost is per row, not per
// weight). Use --benchmark_repetitions=N and read the best/median: the machine is shared.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant/simd/kernels.h"
#include "quant/simd/packed.h"

namespace {

using gguf::TensorType;
using loom::quant::simd::Isa;
namespace q = loom::quant;
namespace simd = loom::quant::simd;

struct Matrix {
  TensorType wt;
  int64_t rows, k;
  size_t row_bytes, bytes;
  std::vector<uint8_t> pool;  // copies of the weight matrix, back to back
  size_t copies;
  bool packed = false;        // pool holds x8 groups (packed.h)
};

Matrix make_matrix(TensorType wt, int64_t rows, int64_t k, size_t pool_bytes) {
  Matrix m{wt, rows, k, q::row_size(wt, k), 0, {}, 0};
  m.bytes = m.row_bytes * size_t(rows);
  m.copies = std::max<size_t>(1, pool_bytes / m.bytes);
  m.pool.resize(m.bytes * m.copies);
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : x) v = nd(rng);
    q::quantize_row(wt, x.data(), m.pool.data() + size_t(r) * m.row_bytes, k);
  }
  for (size_t c = 1; c < m.copies; ++c) std::copy_n(m.pool.data(), m.bytes, m.pool.data() + c * m.bytes);
  return m;
}

// The same matrix as x8 groups.
Matrix make_packed(TensorType wt, int64_t rows, int64_t k, size_t pool_bytes) {
  Matrix src = make_matrix(wt, rows, k, 0);
  Matrix m{wt, rows, k, simd::packed_group_bytes(wt, k), 0, {}, 0, true};
  m.bytes = m.row_bytes * size_t(rows / 8);
  m.copies = std::max<size_t>(1, pool_bytes / m.bytes);
  m.pool.resize(m.bytes * m.copies);
  simd::pack_rows(wt, src.pool.data(), src.row_bytes, rows, k, m.pool.data());
  for (size_t c = 1; c < m.copies; ++c) std::copy_n(m.pool.data(), m.bytes, m.pool.data() + c * m.bytes);
  return m;
}

std::vector<uint8_t> make_acts(TensorType wt, int64_t k, int64_t n, size_t* row_bytes) {
  const TensorType at = simd::act_type(wt);
  *row_bytes = q::row_size(at, k);
  std::vector<uint8_t> a(*row_bytes * size_t(n));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    for (auto& v : x) v = nd(rng);
    simd::quantize_activations(at, x.data(), a.data() + size_t(i) * *row_bytes, k);
  }
  return a;
}

const char* level_name(Isa l) { return l == Isa::avx512 ? "avx512vnni" : l == Isa::avx2 ? "avx2" : "scalar"; }

struct Shape {
  TensorType wt;
  int64_t rows, k;
  size_t pool_bytes;
  bool packed = false;
};

// One matrix at a time, built on first use, so the pools of all types never coexist.
const Matrix* matrix(const Shape& s) {
  static std::unique_ptr<Matrix> cur;
  if (!cur || cur->wt != s.wt || cur->rows != s.rows || cur->k != s.k || cur->packed != s.packed ||
      cur->copies != std::max<size_t>(1, s.pool_bytes / (q::row_size(s.wt, s.k) * size_t(s.rows)))) {
    cur.reset();
    cur = std::make_unique<Matrix>(s.packed ? make_packed(s.wt, s.rows, s.k, s.pool_bytes) : make_matrix(s.wt, s.rows, s.k, s.pool_bytes));
  }
  return cur.get();
}

void run_gemm(benchmark::State& st, Shape shape, Isa level, int64_t n_act) {
  const Matrix* m = matrix(shape);
  simd::force_isa(level);
  size_t arb = 0;
  const auto act = make_acts(m->wt, m->k, n_act, &arb);
  std::vector<float> out(size_t(m->rows * n_act));
  size_t c = 0;
  for (auto _ : st) {
    if (m->packed)
      simd::gemm_packed(m->wt, m->pool.data() + c * m->bytes, m->rows, act.data(), arb, n_act, out.data(), size_t(m->rows), m->k);
    else
      simd::gemm(m->wt, m->pool.data() + c * m->bytes, m->row_bytes, m->rows, act.data(), arb, n_act,
                 out.data(), size_t(m->rows), m->k);
    benchmark::DoNotOptimize(out.data());
    if (++c == m->copies) c = 0;
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(m->bytes));
  const double flops = 2.0 * double(m->rows) * double(m->k) * double(n_act);
  st.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9 * double(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["tok/s"] = benchmark::Counter(double(n_act) * double(st.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::printf("best ISA on this CPU: %s\n", (simd::force_isa(simd::best_isa()), simd::isa_name()));
  std::vector<Isa> levels{Isa::scalar};
  if (simd::best_isa() >= Isa::avx2) levels.push_back(Isa::avx2);
  if (simd::best_isa() >= Isa::avx512) levels.push_back(Isa::avx512);
  const TensorType types[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                              TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                              TensorType::F16,  TensorType::BF16, TensorType::F32};
  for (TensorType wt : types) {
    const std::string tn(gguf::type_name(wt));
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{2048, 8192}, {576, 1536}}) {
      const Shape m{wt, rows, k, size_t(256) << 20};
      for (Isa l : levels) {
        const std::string name = "gemv/" + tn + "/" + level_name(l) + "/" + std::to_string(rows) + "x" + std::to_string(k);
        benchmark::RegisterBenchmark(name.c_str(), run_gemm, m, l, int64_t(1))->Unit(benchmark::kMicrosecond)->UseRealTime();
      }
    }
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{576, 1536}, {2048, 2048}}) {
      const Shape m{wt, rows, k, 0};
      for (Isa l : levels)
        for (int64_t n : {64, 512}) {
          if (l == Isa::scalar && (n != 64 || rows != 576)) continue;  // too slow to be useful
          const std::string name = "gemm/" + tn + "/" + level_name(l) + "/" + std::to_string(rows) + "x" +
                                   std::to_string(k) + "/" + std::to_string(n);
          benchmark::RegisterBenchmark(name.c_str(), run_gemm, m, l, n)->Unit(benchmark::kMillisecond)->UseRealTime();
        }
    }
  }
  // x8 layouts (packed.h), AVX2 and AVX-512 kernels: "gemvx8/..." and "gemmx8/...", the same
  // shapes, plus the batched-decode widths 8 and 32; "gemvhot"/"gemmhot" are the stored-row
  // kernels at those widths, for comparison.
  for (Isa l : levels) {
    if (l < Isa::avx2) continue;
    const std::string ln = level_name(l);
    for (TensorType wt : types) {
      if (!simd::has_packed_kernel(wt, l)) continue;
      const std::string tn(gguf::type_name(wt));
      for (auto [rows, k] : {std::pair<int64_t, int64_t>{2048, 8192}, {576, 1536}}) {
        const Shape m{wt, rows, k, size_t(256) << 20, true};
        const std::string name = "gemvx8/" + tn + "/" + ln + "/" + std::to_string(rows) + "x" + std::to_string(k);
        benchmark::RegisterBenchmark(name.c_str(), run_gemm, m, l, int64_t(1))->Unit(benchmark::kMicrosecond)->UseRealTime();
      }
      {  // weights hot in L2: the kernel's compute ceiling
        const Shape m{wt, 576, 1536, 0, true};
        benchmark::RegisterBenchmark(("gemvx8hot/" + tn + "/" + ln + "/576x1536").c_str(), run_gemm, m, l, int64_t(1))
            ->Unit(benchmark::kMicrosecond)->UseRealTime();
        const Shape u{wt, 576, 1536, 0, false};
        benchmark::RegisterBenchmark(("gemvhot/" + tn + "/" + ln + "/576x1536").c_str(), run_gemm, u, l, int64_t(1))
            ->Unit(benchmark::kMicrosecond)->UseRealTime();
        for (int64_t n : {8, 32}) {
          benchmark::RegisterBenchmark(("gemmx8hot/" + tn + "/" + ln + "/576x1536/" + std::to_string(n)).c_str(), run_gemm, m, l, n)
              ->Unit(benchmark::kMicrosecond)->UseRealTime();
          benchmark::RegisterBenchmark(("gemmhot/" + tn + "/" + ln + "/576x1536/" + std::to_string(n)).c_str(), run_gemm, u, l, n)
              ->Unit(benchmark::kMicrosecond)->UseRealTime();
        }
      }
      // One prefill tile of matmul.cpp (128 weight rows x 256 activation rows) at the Qwen
      // shapes' k: 896 (qwen2's hidden size, the Q5_0 / Q8_0 fallback), 1024, 3072, 4864.
      for (int64_t k : {896, 1024, 3072, 4864}) {
        if (k % q::block_elems(wt)) continue;
        const Shape m{wt, 128, k, 0, true};
        const std::string name = "gemmx8tile/" + tn + "/" + ln + "/128x" + std::to_string(k) + "/256";
        benchmark::RegisterBenchmark(name.c_str(), run_gemm, m, l, int64_t(256))->Unit(benchmark::kMillisecond)->UseRealTime();
      }
      for (auto [rows, k] : {std::pair<int64_t, int64_t>{576, 1536}, {2048, 2048}})
        for (int64_t n : {64, 512}) {
          const Shape m{wt, rows, k, 0, true};
          const std::string name = "gemmx8/" + tn + "/" + ln + "/" + std::to_string(rows) + "x" + std::to_string(k) + "/" + std::to_string(n);
          benchmark::RegisterBenchmark(name.c_str(), run_gemm, m, l, n)->Unit(benchmark::kMillisecond)->UseRealTime();
        }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
