// Reference (de)quantization of the 32-element block types, following ggml's
// quantize_row_*_ref / dequantize_row_* step by step (including their truncating casts) so
// the bytes are identical to what llama.cpp writes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/fp16.h"
#include "quant/ref.h"

namespace loom::quant::ref {

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[kQK / 2 + j] * id;
      const uint8_t xi0 = uint8_t(std::min(15, int(int8_t(x0 + 8.5f))));
      const uint8_t xi1 = uint8_t(std::min(15, int(int8_t(x1 + 8.5f))));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[kQK / 2 + j] - min) * id;
      const uint8_t xi0 = uint8_t(std::min(15, int(int8_t(x0 + 0.5f))));
      const uint8_t xi1 = uint8_t(std::min(15, int(int8_t(x1 + 0.5f))));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[kQK / 2 + j] * id;
      const uint8_t xi0 = uint8_t(std::min(31, int(int8_t(x0 + 16.5f))));
      const uint8_t xi1 = uint8_t(std::min(31, int(int8_t(x1 + 16.5f))));
      y[i].qs[j] = uint8_t((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[kQK / 2 + j] - min) * id;
      const uint8_t xi0 = uint8_t(x0 + 0.5f);  // ggml clamps nothing here; range is [0, 31]
      const uint8_t xi1 = uint8_t(x1 + 0.5f);
      y[i].qs[j] = uint8_t((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      y[i].qs[j] = int8_t(std::round(x[j] * id));
      y[i].qs[kQK / 2 + j] = int8_t(std::round(x[kQK / 2 + j] * id));
      sum += y[i].qs[j] + y[i].qs[kQK / 2 + j];
    }
    y[i].s = fp32_to_fp16(float(sum) * d);
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float((x[i].qs[j] & 0x0f) - 8) * d;
      y[j + kQK / 2] = float((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(x[i].qs[j] & 0x0f) * d + m;
      y[j + kQK / 2] = float(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = int(((qh >> j) << 4) & 0x10), xh1 = int((qh >> (j + 12)) & 0x10);
      y[j] = float(((x[i].qs[j] & 0x0f) | xh0) - 16) * d;
      y[j + kQK / 2] = float(((x[i].qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = int(((qh >> j) << 4) & 0x10), xh1 = int((qh >> (j + 12)) & 0x10);
      y[j] = float((x[i].qs[j] & 0x0f) | xh0) * d + m;
      y[j + kQK / 2] = float((x[i].qs[j] >> 4) | xh1) * d + m;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t k) {
  const int64_t nb = k / kQK;
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

}  // namespace loom::quant::ref
