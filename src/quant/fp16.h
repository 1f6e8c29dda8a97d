// IEEE half and bfloat16 <-> float conversions, bit-exact with ggml's scalar paths:
// - fp16 -> fp32 is exact (subnormals included); NaN keeps sign and payload with the quiet bit
//   set (what ggml's table, built by float arithmetic, holds).
// - fp32 -> fp16 rounds to nearest even, overflow -> inf, NaN -> sign | 0x7E00 (ggml's
//   portable ggml_compute_fp32_to_fp16). Done in integers so no compiler flag can change it.
// - bf16 -> fp32 is a shift; fp32 -> bf16 rounds to nearest even, NaN forced quiet
//   (ggml_compute_fp32_to_bf16; subnormals are kept, not flushed).
#pragma once
#include <bit>
#include <cstdint>

namespace loom::quant {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man ? (0x400000u | (man << 13)) : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal half: normalise the mantissa
    int e = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    bits = sign | (uint32_t(e) << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal half or zero
    if (ax <= 0x33000000u) return sign;          // <= 2^-25 rounds (ties-to-even) to zero
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value / 2^-24 = m >> shift
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | uint16_t(q);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;  // rebias 127 -> 15, drop 13 mantissa bits
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | uint16_t(h);
}

// x rounded to the nearest f16 value (ties to even), back in f32: what an f32 operand becomes
// where ggml converts it for an f16 dot product.
inline float round_to_fp16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64u);  // quiet NaN
  return uint16_t((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace loom::quant
