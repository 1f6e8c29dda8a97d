// Scalar dot products of the K types with Q8_K activations, computed as ggml's
// ggml_vec_dot_qX_K_q8_K_generic: integer sums per group, eight float lanes per super-block
// (sums[8]) folded at the end, and the min correction through Q8_K's bsums.
#include <cstring>

#include "quant/fp16.h"
#include "quant/kquant_search.h"
#include "quant/ref.h"

namespace loom::quant::ref {

// The K super-blocks' quant codes in element order, offsets removed (Q3_K: -4 where the high
// bit is clear; Q6_K: -32); scales and mins stay with the caller.
void unpack_q2_K(const BlockQ2_K& b, int8_t* a) {
  const uint8_t* q2 = b.qs;
  for (int j = 0; j < kQK_K; j += 128, q2 += 32)
    for (int shift = 0; shift < 8; shift += 2, a += 32)
      for (int l = 0; l < 32; ++l) a[l] = int8_t((q2[l] >> shift) & 3);
}

void unpack_q3_K(const BlockQ3_K& b, int8_t* a) {
  const uint8_t* q3 = b.qs;
  const uint8_t* hm = b.hmask;
  uint8_t m = 1;
  for (int j = 0; j < kQK_K; j += 128, q3 += 32) {
    for (int shift = 0; shift < 8; shift += 2, a += 32, m = uint8_t(m << 1))
      for (int l = 0; l < 32; ++l) a[l] = int8_t(((q3[l] >> shift) & 3) - (hm[l] & m ? 0 : 4));
  }
}

void unpack_q4_K(const BlockQ4_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  for (int j = 0; j < kQK_K / 64; ++j, q4 += 32) {
    for (int l = 0; l < 32; ++l) a[l] = int8_t(q4[l] & 0xF);
    a += 32;
    for (int l = 0; l < 32; ++l) a[l] = int8_t(q4[l] >> 4);
    a += 32;
  }
}

void unpack_q5_K(const BlockQ5_K& b, int8_t* a) {
  const uint8_t* q4 = b.qs;
  const uint8_t* hm = b.qh;
  uint8_t m = 1;
  for (int j = 0; j < kQK_K / 64; ++j, q4 += 32) {
    for (int l = 0; l < 32; ++l) a[l] = int8_t((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
    a += 32;
    m = uint8_t(m << 1);
    for (int l = 0; l < 32; ++l) a[l] = int8_t((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
    a += 32;
    m = uint8_t(m << 1);
  }
}

void unpack_q6_K(const BlockQ6_K& b, int8_t* a) {
  const uint8_t* q4 = b.ql;
  const uint8_t* qh = b.qh;
  for (int j = 0; j < kQK_K; j += 128, a += 128, q4 += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      a[l + 0] = int8_t(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      a[l + 32] = int8_t(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      a[l + 64] = int8_t(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      a[l + 96] = int8_t(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

namespace {

// The eight-lane accumulation ggml's generic K dots share: aux32[l] += scale * (q8 * a) for
// runs of 8 elements, `group` elements per scale.
void accumulate_lanes(const int8_t* q8, const int8_t* a, const int* scales, int group,
                      int32_t aux32[8]) {
  std::memset(aux32, 0, 8 * sizeof(int32_t));
  for (int j = 0; j < kQK_K / group; ++j) {
    for (int r = 0; r < group / 8; ++r, q8 += 8, a += 8)
      for (int l = 0; l < 8; ++l) aux32[l] += scales[j] * int(int16_t(q8[l] * a[l]));
  }
}

float fold_lanes(float sumf, const float sums[8]) {
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

}  // namespace

float vec_dot_q2_K_q8_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    int isum = 0, is = 0;
    for (int k = 0; k < kQK_K / 128; ++k, q2 += 32) {
      for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
        int d = sc[is++] & 0xF, isuml = 0;
        for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
        d = sc[is++] & 0xF;
        isuml = 0;
        for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
      }
    }
    sumf += dall * float(isum) - dmin * float(summs);
  }
  return sumf;
}

float vec_dot_q3_K_q8_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  int8_t aux8[kQK_K];
  int32_t aux32[8];
  int scales[16];
  float sums[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q3_K(x[i], aux8);
    for (int j = 0; j < 16; ++j) scales[j] = q3k_scale(x[i].scales, j) - 32;
    accumulate_lanes(y[i].qs, aux8, scales, 16, aux32);
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * float(aux32[l]);
  }
  return fold_lanes(0.f, sums);
}

namespace {

// Q4_K and Q5_K differ only in how the quant values are unpacked into aux8.
template <typename Block>
float dot_scale_min(const Block* x, const BlockQ8_K* y, int64_t n,
                    void (*unpack)(const Block&, int8_t*)) {
  const int64_t nb = n / kQK_K;
  int8_t aux8[kQK_K];
  int32_t aux32[8];
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    unpack(x[i], aux8);
    int scales[8], mins[8];
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      get_scale_min_k4(j, x[i].scales, &sc, &mn);
      scales[j] = sc;
      mins[j] = mn;
    }
    int sumi = 0;
    for (int j = 0; j < kQK_K / 16; ++j) sumi += y[i].bsums[j] * mins[j / 2];
    accumulate_lanes(y[i].qs, aux8, scales, 32, aux32);
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * float(aux32[l]);
    const float dmin = fp16_to_fp32(x[i].dmin) * y[i].d;
    sumf -= dmin * float(sumi);
  }
  return fold_lanes(sumf, sums);
}

}  // namespace

float vec_dot_q4_K_q8_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t n) {
  return dot_scale_min(x, y, n, unpack_q4_K);
}

float vec_dot_q5_K_q8_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t n) {
  return dot_scale_min(x, y, n, unpack_q5_K);
}

float vec_dot_q6_K_q8_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  int8_t aux8[kQK_K];
  int32_t aux32[8];
  int scales[16];
  float sums[8] = {};
  for (int64_t i = 0; i < nb; ++i) {
    unpack_q6_K(x[i], aux8);
    for (int j = 0; j < 16; ++j) scales[j] = x[i].scales[j];
    accumulate_lanes(y[i].qs, aux8, scales, 16, aux32);
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * float(aux32[l]);
  }
  return fold_lanes(0.f, sums);
}

}  // namespace loom::quant::ref
