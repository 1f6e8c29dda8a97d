// Run-time choice of the kernel level (CPUID, capped by force_isa: the fast backend's `isa`
// schedule key), argument
// checks, and the scalar level: quant::vec_dot per output element, the definition itself.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "quant/ggml_order.h"
#include "quant/quant.h"
#include "quant/simd/isa.h"
#include "quant/simd/kernels.h"

namespace loom::quant::simd {
namespace {

using gguf::TensorType;

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2"))
    return Isa::avx512;  // every AVX-512 CPU has F16C
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    unsigned eax, ebx, ecx, edx;
    __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(1), "c"(0));
    if (ecx & (1u << 29)) return Isa::avx2;  // F16C
  }
#endif
  return Isa::scalar;
}

Isa best_level() {
  static const Isa best = detect();
  return best;
}

std::atomic<int>& level() {
  static std::atomic<int> l{int(best_level())};
  return l;
}

bool has_simd_kernel(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
    case TensorType::Q8_0: case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K:
    case TensorType::F32: case TensorType::F16: case TensorType::BF16:
      return true;
    default:
      return false;
  }
}

bool is_weight_type(TensorType t) {
  return has_simd_kernel(t) || t == TensorType::Q2_K || t == TensorType::Q3_K;
}

void gemm_scalar(TensorType wt, const detail::GemmArgs& g) {
  const bool float_act = wt == TensorType::F16 || wt == TensorType::BF16;
  std::vector<float> wf(float_act ? size_t(g.k) : 0);
  for (int64_t r = 0; r < g.n_rows; ++r) {
    const uint8_t* wr = g.w + r * g.w_row_bytes;
    if (float_act) dequantize_row(wt, wr, wf.data(), g.k);
    for (int64_t a = 0; a < g.n_act; ++a) {
      const uint8_t* x = g.act + a * g.act_row_bytes;
      g.out[a * g.out_stride + r] =
          float_act ? vec_dot(TensorType::F32, wf.data(), x, g.k) : vec_dot(wt, wr, x, g.k);
    }
  }
}

}  // namespace

TensorType act_type(TensorType wt) {
  if (wt == TensorType::F16 || wt == TensorType::BF16 || wt == TensorType::F32) return TensorType::F32;
  if (!is_weight_type(wt)) fail("quant::simd: no matrix kernel for weight type {}", gguf::type_name(wt));
  return vec_dot_type(wt);
}

void quantize_activations(TensorType t, const float* x, void* y, int64_t n) {
  if (t != TensorType::F32 && t != TensorType::Q8_0 && t != TensorType::Q8_1 && t != TensorType::Q8_K)
    fail("quant::simd::quantize_activations: {} is not an activation type (Q8_0, Q8_1, Q8_K, F32)",
         gguf::type_name(t));
  if (n % block_elems(t) != 0)
    fail("quant::simd::quantize_activations: {} elements is not a whole number of {} blocks", n,
         gguf::type_name(t));
  if (t == TensorType::F32) {
    std::memcpy(y, x, size_t(n) * sizeof(float));
    return;
  }
  const Isa l = isa();
  if (l == Isa::avx512 && detail::avx512::quantize(t, x, y, n)) return;
  if (l == Isa::avx2 && detail::avx2::quantize(t, x, y, n)) return;
  ggml::quantize_activations(t, x, y, n);
}

void gemm(TensorType wt, const void* w, size_t w_row_bytes, int64_t n_rows, const void* act,
          size_t act_row_bytes, int64_t n_act, float* out, size_t out_stride, int64_t k) {
  const TensorType at = act_type(wt);
  if (k <= 0 || k % block_elems(wt) != 0 || k % block_elems(at) != 0)
    fail("quant::simd::gemm: k = {} is not a whole number of {} blocks", k, gguf::type_name(wt));
  if (n_rows < 0 || n_act < 0) fail("quant::simd::gemm: negative row count");
  if (w_row_bytes < row_size(wt, k) || act_row_bytes < row_size(at, k))
    fail("quant::simd::gemm: row strides ({}, {}) shorter than a {} / {} row of {} elements",
         w_row_bytes, act_row_bytes, gguf::type_name(wt), gguf::type_name(at), k);
  if (n_act > 1 && out_stride < size_t(n_rows)) fail("quant::simd::gemm: out_stride < n_rows");
  if (n_rows == 0 || n_act == 0) return;
  const detail::GemmArgs g{(const uint8_t*)w, w_row_bytes, n_rows, (const uint8_t*)act,
                           act_row_bytes, n_act, out, out_stride, k};
  const Isa l = isa();
  if (l == Isa::avx512 && detail::avx512::gemm(wt, g)) return;
  if (l == Isa::avx2 && detail::avx2::gemm(wt, g)) return;
  gemm_scalar(wt, g);
}

Isa best_isa() { return best_level(); }
Isa isa() { return Isa(level().load(std::memory_order_relaxed)); }
void force_isa(Isa l) { level().store(int(std::min(l, best_level())), std::memory_order_relaxed); }

const char* isa_name() {
  switch (isa()) {
    case Isa::avx512: return "avx512vnni";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace loom::quant::simd
