// Scalar dot products of the 32-element block types and the float types, computed as ggml's
// generic (non-SIMD) ggml_vec_dot_* do: integer sums per block, then one float update per
// block in ggml's operand order. Float rows accumulate in double, as ggml_float does.
#include <cstring>

#include "quant/fp16.h"
#include "quant/ref.h"

namespace loom::quant::ref {

float vec_dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK;
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi0 += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
      sumi1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + kQK / 2];
    }
    sumf += float(sumi0 + sumi1) * fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d);
  }
  return sumf;
}

float vec_dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t n) {
  const int64_t nb = n / kQK;
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi0 += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
      sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + kQK / 2];
    }
    sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * float(sumi0 + sumi1) +
            fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
  }
  return sumf;
}

float vec_dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK;
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = int(((qh >> j) & 1u) << 4), xh1 = int(((qh >> (j + 16)) & 1u) << 4);
      sumi0 += (((x[ib].qs[j] & 0x0F) | xh0) - 16) * y[ib].qs[j];
      sumi1 += (((x[ib].qs[j] >> 4) | xh1) - 16) * y[ib].qs[j + kQK / 2];
    }
    sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * float(sumi0 + sumi1);
  }
  return sumf;
}

float vec_dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t n) {
  const int64_t nb = n / kQK;
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = int(((qh >> j) & 1u) << 4), xh1 = int(((qh >> (j + 16)) & 1u) << 4);
      sumi0 += ((x[ib].qs[j] & 0x0F) | xh0) * y[ib].qs[j];
      sumi1 += ((x[ib].qs[j] >> 4) | xh1) * y[ib].qs[j + kQK / 2];
    }
    sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * float(sumi0 + sumi1) +
            fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
  }
  return sumf;
}

float vec_dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK;
  float sumf = 0;
  for (int64_t ib = 0; ib < nb; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
    sumf += float(sumi) * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
  }
  return sumf;
}

float vec_dot_f32(const float* x, const float* y, int64_t n) {
  double sumf = 0.0;
  for (int64_t i = 0; i < n; ++i) sumf += double(x[i] * y[i]);
  return float(sumf);
}

float vec_dot_f16(const uint16_t* x, const uint16_t* y, int64_t n) {
  double sumf = 0.0;
  for (int64_t i = 0; i < n; ++i) sumf += double(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  return float(sumf);
}

float vec_dot_bf16(const uint16_t* x, const uint16_t* y, int64_t n) {
  double sumf = 0.0;
  for (int64_t i = 0; i < n; ++i) sumf += double(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  return float(sumf);
}

}  // namespace loom::quant::ref
