// Block layouts of ggml's quantized types, byte for byte as ggml-common.h defines them, so a
// tensor's bytes in a GGUF file can be viewed as an array of these structs. Scales stored as
// IEEE half are kept as raw uint16_t bits (see fp16.h); Q8_K's scale is a plain float.
#pragma once
#include <cstdint>

namespace loom::quant {

constexpr int kQK = 32;     // elements per block of the "legacy" types (Q4_0 .. Q8_1)
constexpr int kQK_K = 256;  // elements per super-block of the K types (Q2_K .. Q8_K)
constexpr int kKScaleBytes = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

using Half = uint16_t;  // IEEE binary16 bits

struct BlockQ4_0 {  // x = d * (q - 8)
  Half d;
  uint8_t qs[kQK / 2];  // element j in low nibble of qs[j], element j+16 in the high nibble
};
struct BlockQ4_1 {  // x = d * q + m
  Half d, m;
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {  // x = d * (q - 16), fifth bit of element j is bit j of qh
  Half d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {  // x = d * q + m
  Half d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {  // x = d * q
  Half d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {  // activation format for Q4_1/Q5_1 dots; s = d * sum(qs)
  Half d, s;
  int8_t qs[kQK];
};

struct BlockQ2_K {  // 16 groups of 16: x = d * (scales & 15) * q - dmin * (scales >> 4)
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  Half d, dmin;
};
struct BlockQ3_K {  // 16 groups of 16, 6-bit signed scales packed in 12 bytes, high bit in hmask
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  Half d;
};
struct BlockQ4_K {  // 8 groups of 32: x = d * sc * q - dmin * m, 6-bit sc/m packed in 12 bytes
  Half d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  Half d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {  // 16 groups of 16: x = d * scales * (q - 32)
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  Half d;
};
struct BlockQ8_K {  // activation format of the K dots; bsums = sums of 16 consecutive qs
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace loom::quant
