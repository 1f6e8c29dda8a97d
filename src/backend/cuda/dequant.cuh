// Device-side dequantization of ggml block formats, eight consecutive elements at a time: a
// lane of a warp turns elements [e, e + 8) of a row (e a multiple of 8) into floats. Eight
// never straddles a group with its own scale in any format here, so each call reads one
// scale. Formulas as quant/ref (the scalar reference these are tested against):
//   Q4_0 d(q-8) | Q4_1 dq+m | Q5_0 d(q-16) | Q5_1 dq+m | Q8_0 dq
//   Q4_K/Q5_K: 8 groups of 32, 6-bit scale and min each: d*sc*q - dmin*m
//   Q6_K: 16 groups of 16, int8 scales: d*sc*(q-32) | F16, BF16, F32 plain.
#pragma once
#include <cuda_fp16.h>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace loom::backend::cuda {

using gguf::TensorType;

template <TensorType T> struct Format;
template <> struct Format<TensorType::F32> { static constexpr int kElems = 1, kBytes = 4; };
template <> struct Format<TensorType::F16> { static constexpr int kElems = 1, kBytes = 2; };
template <> struct Format<TensorType::BF16> { static constexpr int kElems = 1, kBytes = 2; };
template <> struct Format<TensorType::Q4_0> { static constexpr int kElems = 32, kBytes = 18; };
template <> struct Format<TensorType::Q4_1> { static constexpr int kElems = 32, kBytes = 20; };
template <> struct Format<TensorType::Q5_0> { static constexpr int kElems = 32, kBytes = 22; };
template <> struct Format<TensorType::Q5_1> { static constexpr int kElems = 32, kBytes = 24; };
template <> struct Format<TensorType::Q8_0> { static constexpr int kElems = 32, kBytes = 34; };
template <> struct Format<TensorType::Q4_K> { static constexpr int kElems = 256, kBytes = 144; };
template <> struct Format<TensorType::Q5_K> { static constexpr int kElems = 256, kBytes = 176; };
template <> struct Format<TensorType::Q6_K> { static constexpr int kElems = 256, kBytes = 210; };

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(uint16_t(p[0] | (p[1] << 8))));
}
__device__ __forceinline__ uint32_t u32_at(const uint8_t* p) {  // unaligned little-endian
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
__device__ __forceinline__ uint64_t u64_at(const uint8_t* p) {
  return uint64_t(u32_at(p)) | (uint64_t(u32_at(p + 4)) << 32);
}

// Q4_K/Q5_K scale and min of group j (ggml's get_scale_min_k4) from the 12 packed bytes held in
// head.y..w, by shifts rather than a byte array (a run-time index would put it in local memory).
__device__ __forceinline__ void scale_min(int j, int4 head, float& sc, float& m) {
  const int b = 8 * (j & 3);
  const uint32_t s0 = uint32_t(head.y) >> b, s1 = uint32_t(head.z) >> b, s2 = uint32_t(head.w) >> b;
  if (j < 4) {
    sc = float(s0 & 63);
    m = float(s1 & 63);
  } else {
    sc = float((s2 & 0xF) | (((s0 >> 6) & 3) << 4));
    m = float(((s2 >> 4) & 0xF) | (((s1 >> 6) & 3) << 4));
  }
}

// Q4_K/Q5_K: scale and min of group j (0..7) from the 12 packed bytes (ggml's get_scale_min_k4).
__device__ __forceinline__ void k4_scale_min(int j, const uint8_t* q, float& sc, float& m) {
  if (j < 4) {
    sc = float(q[j] & 63);
    m = float(q[j + 4] & 63);
  } else {
    sc = float((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = float((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

template <TensorType T>
__device__ __forceinline__ void dequant8(const uint8_t* row, int64_t e, float* w) {
  constexpr int E = Format<T>::kElems, B = Format<T>::kBytes;
  const uint8_t* b = row + (e / E) * B;
  const int o = int(e % E);
  if constexpr (T == TensorType::F32) {
    // Rows start 16-byte aligned (K % 8 == 0): two 16-byte loads rather than eight 4-byte ones.
    const float4* f = reinterpret_cast<const float4*>(reinterpret_cast<const float*>(row) + e);
    const float4 a = f[0], c = f[1];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = c.x, w[5] = c.y, w[6] = c.z, w[7] = c.w;
  } else if constexpr (T == TensorType::F16) {
    const uint4 v = *reinterpret_cast<const uint4*>(reinterpret_cast<const __half*>(row) + e);  // one 16-byte load
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __half2float(__ushort_as_half(uint16_t(u[i / 2] >> (16 * (i % 2)))));
  } else if constexpr (T == TensorType::BF16) {
    const uint4 v = *reinterpret_cast<const uint4*>(reinterpret_cast<const uint16_t*>(row) + e);
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __uint_as_float(i % 2 ? u[i / 2] & 0xFFFF0000u : u[i / 2] << 16);
  } else if constexpr (T == TensorType::Q4_0 || T == TensorType::Q4_1) {
    const float d = half_at(b);
    const float m = T == TensorType::Q4_1 ? half_at(b + 2) : 0.f;
    const uint8_t* qs = b + (T == TensorType::Q4_1 ? 4 : 2) + (o & 15);
    const uint64_t q = u64_at(qs);
    const int shift = o < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int v = int((q >> (8 * i + shift)) & 0xF);
      w[i] = T == TensorType::Q4_0 ? d * float(v - 8) : d * float(v) + m;
    }
  } else if constexpr (T == TensorType::Q5_0 || T == TensorType::Q5_1) {
    const float d = half_at(b);
    const float m = T == TensorType::Q5_1 ? half_at(b + 2) : 0.f;
    const uint8_t* qhp = b + (T == TensorType::Q5_1 ? 4 : 2);
    const uint32_t qh = u32_at(qhp);
    const uint64_t q = u64_at(qhp + 4 + (o & 15));
    const int shift = o < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int v = int((q >> (8 * i + shift)) & 0xF) | int(((qh >> (o + i)) & 1) << 4);
      w[i] = T == TensorType::Q5_0 ? d * float(v - 16) : d * float(v) + m;
    }
  } else if constexpr (T == TensorType::Q8_0) {
    const float d = half_at(b);
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2 + o);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = d * float(qs[i]);
  } else if constexpr (T == TensorType::Q4_K || T == TensorType::Q5_K) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* scales = b + 4;
    const int pair = o / 64, within = o % 64, hi = within >= 32, l = within % 32;
    float sc, mn;
    k4_scale_min(2 * pair + hi, scales, sc, mn);
    const float ds = d * sc, dm = dmin * mn;
    const uint8_t* qs = b + (T == TensorType::Q5_K ? 48 : 16) + 32 * pair + l;
    const uint64_t q = u64_at(qs);
    uint64_t qh = 0;
    if constexpr (T == TensorType::Q5_K) qh = u64_at(b + 16 + l);
    const int bit = 2 * pair + hi;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      int v = int((q >> (8 * i + 4 * hi)) & 0xF);
      if constexpr (T == TensorType::Q5_K) v |= int(((qh >> (8 * i + bit)) & 1) << 4);
      w[i] = ds * float(v) - dm;
    }
  } else if constexpr (T == TensorType::Q6_K) {
    const uint8_t* ql = b;
    const uint8_t* qhb = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    const int half = o / 128, r = o % 128, quarter = r / 32, l = r % 32;
    const uint8_t* qlp = ql + 64 * half + l + (quarter & 1) * 32;
    const uint64_t lo = u64_at(qlp), hi = u64_at(qhb + 32 * half + l);
    const float ds = d * float(sc[8 * half + l / 16 + 2 * quarter]);
    const int lshift = quarter >= 2 ? 4 : 0, hshift = 2 * quarter;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int v = int((lo >> (8 * i + lshift)) & 0xF) | int(((hi >> (8 * i + hshift)) & 3) << 4);
      w[i] = ds * float(v - 32);
    }
  }
}

}  // namespace loom::backend::cuda
