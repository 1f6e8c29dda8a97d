// Weights to f16 tiles for the prefill GEMM (gemm.cpp): each thread turns eight consecutive
// elements of a row into halves, from the stored format (dequant.cuh) or, for the types the
// integer-dot kernels keep packed (packed_layout.h), from the packed layout with the same
// formulas. Plus activations f32 -> f16.
#include <cuda_fp16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/packed_layout.h"

namespace loom::backend::cuda {

namespace {

__device__ __forceinline__ float half_u16p(const uint8_t* p) {  // 2-byte aligned
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// Elements [e, e + 8) of a packed row of nb blocks.
template <TensorType T>
__device__ __forceinline__ void dequant8_packed(const uint8_t* row, int64_t nb, int64_t e, float* w) {
  constexpr PackedLayout L = packed_layout(T);
  const int64_t b = e / L.elems;
  const int o = int(e % L.elems);
  const uint8_t* q = row + b * L.quant_bytes;
  const uint8_t* aux = row + nb * L.quant_bytes + b * L.aux_bytes();
  if constexpr (T == TensorType::Q4_0 || T == TensorType::Q4_1) {
    const float d = half_u16p(aux), m = T == TensorType::Q4_1 ? half_u16p(aux + 2) : 0.f;
    const uint64_t v = u64_at(q + (o & 15));
    const int shift = o < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int c = int((v >> (8 * i + shift)) & 0xF);
      w[i] = T == TensorType::Q4_0 ? d * float(c - 8) : d * float(c) + m;
    }
  } else if constexpr (T == TensorType::Q5_0) {
    const float d = half_u16p(aux);
    const uint32_t qh = u32_at(aux + 2);
    const uint64_t v = u64_at(q + (o & 15));
    const int shift = o < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i] = d * float(int((v >> (8 * i + shift)) & 0xF) + int(((qh >> (o + i)) & 1) << 4) - 16);
  } else if constexpr (T == TensorType::Q8_0) {
    const float d = half_u16p(aux);
    const int8_t* c = reinterpret_cast<const int8_t*>(q + o);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = d * float(c[i]);
  } else if constexpr (T == TensorType::Q6_K) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(aux);
    const float d = half_u16p(aux + 16);
    const int half = o / 128, r = o % 128, quarter = r / 32, l = r % 32;
    const uint64_t lo = u64_at(q + 64 * half + l + (quarter & 1) * 32), hi = u64_at(q + 128 + 32 * half + l);
    const float ds = d * float(sc[8 * half + l / 16 + 2 * quarter]);
    const int lshift = quarter >= 2 ? 4 : 0, hshift = 2 * quarter;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i] = ds * float(int((lo >> (8 * i + lshift)) & 0xF) + int(((hi >> (8 * i + hshift)) & 3) << 4) - 32);
  } else {  // Q4_K, Q5_K: packed as stored
    dequant8<T>(row, e, w);
  }
}

template <TensorType T, bool Packed>
__global__ void to_f16_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t N, int64_t K,
                              __half* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one thread per 8 elements
  const int64_t per_row = K / 8;
  if (i >= N * per_row) return;
  const int64_t n = i / per_row, e = (i % per_row) * 8;
  const uint8_t* row = w + size_t(n) * row_bytes;
  float v[8];
  if constexpr (Packed) dequant8_packed<T>(row, K / packed_layout(T).elems, e, v);
  else dequant8<T>(row, e, v);
  __half2 h[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
  *reinterpret_cast<uint4*>(out + n * K + e) = *reinterpret_cast<const uint4*>(h);
}

__global__ void f32_to_f16_kernel(const float* __restrict__ x, int64_t n, __half* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

template <TensorType T, bool Packed>
void launch(const uint8_t* w, size_t rb, int64_t N, int64_t K, __half* out, cudaStream_t s) {
  const int64_t threads = N * (K / 8);
  if (threads <= 0) return;
  to_f16_kernel<T, Packed><<<unsigned((threads + 255) / 256), 256, 0, s>>>(w, rb, N, K, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void weights_to_f16(TensorType t, bool packed, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K, __half* out,
                    cudaStream_t s) {
  if (K % 8 != 0) cuda_invalid("weights_to_f16: K must be a multiple of 8");
  if (packed && !has_q8_kernel(t, K)) cuda_invalid("weights_to_f16: this type has no packed layout");
  switch (t) {
#define LOOM_F16_CASE(TT)                                                  \
  case TensorType::TT:                                                     \
    if (packed) launch<TensorType::TT, true>(w, row_bytes, N, K, out, s);  \
    else launch<TensorType::TT, false>(w, row_bytes, N, K, out, s);        \
    return;
    LOOM_F16_CASE(Q4_0) LOOM_F16_CASE(Q4_1) LOOM_F16_CASE(Q5_0) LOOM_F16_CASE(Q8_0) LOOM_F16_CASE(Q4_K)
    LOOM_F16_CASE(Q5_K) LOOM_F16_CASE(Q6_K)
#undef LOOM_F16_CASE
    case TensorType::F32: launch<TensorType::F32, false>(w, row_bytes, N, K, out, s); return;
    case TensorType::F16: launch<TensorType::F16, false>(w, row_bytes, N, K, out, s); return;
    case TensorType::BF16: launch<TensorType::BF16, false>(w, row_bytes, N, K, out, s); return;
    case TensorType::Q5_1: launch<TensorType::Q5_1, false>(w, row_bytes, N, K, out, s); return;
    default: cuda_invalid("weights_to_f16: no kernel for this weight type");
  }
}

void f32_to_f16(const float* x, int64_t n, __half* out, cudaStream_t s) {
  if (n <= 0) return;
  f32_to_f16_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, n, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::backend::cuda
