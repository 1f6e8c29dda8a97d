// See ggml_order.h. Built with -ffp-contract=off (loom_quant): every fused multiply-add here is
// a std::fma standing for one in ggml's kernels, and every other product is rounded on its own.
#include "quant/ggml_order.h"

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "quant/fp16.h"
#include "quant/kquant_search.h"
#include "quant/quant.h"
#include "quant/ref.h"

namespace loom::quant::ggml {

using gguf::TensorType;

namespace {

// quantize_row_q8_0 / quantize_row_q8_1 (arch/x86/quants.c, AVX branch) for one 32-block.
// Returns Σq; *d gets the f32 scale.
int q8_block(const float* x, Half* d_out, int8_t* qs, float* d) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  *d = amax / 127.f;
  *d_out = fp32_to_fp16(*d);
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = int8_t(std::nearbyint(x[j] * id));  // _mm256_round_ps(_MM_ROUND_NEAREST): ties to even
    sum += qs[j];
  }
  return sum;
}

// The legacy 32-blocks as signed or unsigned integer codes, in element order.
void codes(TensorType t, const uint8_t* blk, int q[kQK]) {
  switch (t) {
    case TensorType::Q4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(blk);
      for (int j = 0; j < 16; ++j) q[j] = (b.qs[j] & 0xF) - 8, q[j + 16] = (b.qs[j] >> 4) - 8;
      return;
    }
    case TensorType::Q4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(blk);
      for (int j = 0; j < 16; ++j) q[j] = b.qs[j] & 0xF, q[j + 16] = b.qs[j] >> 4;
      return;
    }
    case TensorType::Q5_0:
    case TensorType::Q5_1: {
      const uint8_t* qs = t == TensorType::Q5_0 ? reinterpret_cast<const BlockQ5_0*>(blk)->qs
                                                : reinterpret_cast<const BlockQ5_1*>(blk)->qs;
      const uint8_t* qhp = t == TensorType::Q5_0 ? reinterpret_cast<const BlockQ5_0*>(blk)->qh
                                                 : reinterpret_cast<const BlockQ5_1*>(blk)->qh;
      uint32_t qh;
      std::memcpy(&qh, qhp, 4);
      const int off = t == TensorType::Q5_0 ? 16 : 0;
      for (int j = 0; j < 16; ++j) {
        q[j] = ((qs[j] & 0xF) | int(((qh >> j) & 1u) << 4)) - off;
        q[j + 16] = ((qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4)) - off;
      }
      return;
    }
    case TensorType::Q8_0: {
      const auto& b = *reinterpret_cast<const BlockQ8_0*>(blk);
      for (int j = 0; j < kQK; ++j) q[j] = b.qs[j];
      return;
    }
    default: fail("quant::ggml: {} is not a 32-element block type", gguf::type_name(t));
  }
}

Half scale_of(TensorType t, const uint8_t* blk) {
  Half h;
  std::memcpy(&h, blk, sizeof h);  // d is the first field of every legacy block
  (void)t;
  return h;
}

// Eight-lane dot of the legacy types with Q8_0/Q8_1 (ggml_vec_dot_q4_0_q8_0 etc., AVX2, and
// tinyBLAS_Q0_AVX: the same lanes, the same fused update, the same fold).
float dot_legacy(TensorType wt, const uint8_t* w, const uint8_t* a, int64_t n) {
  const bool with_min = wt == TensorType::Q4_1 || wt == TensorType::Q5_1;
  const size_t wb = size_t(block_bytes(wt)), ab = with_min ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  float acc[8] = {};
  float summs = 0.0f;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib, w += wb, a += ab) {
    codes(wt, w, q);
    const int8_t* qa = with_min ? reinterpret_cast<const BlockQ8_1*>(a)->qs : reinterpret_cast<const BlockQ8_0*>(a)->qs;
    Half ad;
    std::memcpy(&ad, a, sizeof ad);
    const float dd = fp16_to_fp32(scale_of(wt, w)) * fp16_to_fp32(ad);
    for (int l = 0; l < 8; ++l) {
      int s = 0;
      for (int e = 4 * l; e < 4 * l + 4; ++e) s += q[e] * qa[e];
      acc[l] = std::fma(dd, float(s), acc[l]);
    }
    if (with_min) {
      Half m, s;
      std::memcpy(&m, w + sizeof(Half), sizeof m);  // Q4_1/Q5_1: d, m first
      s = reinterpret_cast<const BlockQ8_1*>(a)->s;
      summs = std::fma(fp16_to_fp32(m), fp16_to_fp32(s), summs);  // summs += m*s, contracted by GCC
    }
  }
  return hsum8(acc) + summs;
}

// One K super-block as integers: codes q (offsets removed), per-group scales and mins.
struct KBlock {
  int q[kQK_K];
  int sc[16], mn[16];
  int group;  // elements per scale: 16 or 32
  float d, dmin;
};

void k_unpack(TensorType t, const uint8_t* blk, KBlock& k) {
  int8_t q8[kQK_K];
  k.dmin = 0.0f;
  std::memset(k.mn, 0, sizeof k.mn);
  switch (t) {
    case TensorType::Q2_K: {
      const auto& b = *reinterpret_cast<const BlockQ2_K*>(blk);
      ref::unpack_q2_K(b, q8);
      for (int j = 0; j < 16; ++j) k.sc[j] = b.scales[j] & 0xF, k.mn[j] = b.scales[j] >> 4;
      k.group = 16, k.d = fp16_to_fp32(b.d), k.dmin = fp16_to_fp32(b.dmin);
      break;
    }
    case TensorType::Q3_K: {
      const auto& b = *reinterpret_cast<const BlockQ3_K*>(blk);
      ref::unpack_q3_K(b, q8);
      for (int j = 0; j < 16; ++j) k.sc[j] = ref::q3k_scale(b.scales, j) - 32;
      k.group = 16, k.d = fp16_to_fp32(b.d);
      break;
    }
    case TensorType::Q4_K:
    case TensorType::Q5_K: {
      const uint8_t* scales;
      Half d, dmin;
      if (t == TensorType::Q4_K) {
        const auto& b = *reinterpret_cast<const BlockQ4_K*>(blk);
        ref::unpack_q4_K(b, q8);
        scales = b.scales, d = b.d, dmin = b.dmin;
      } else {
        const auto& b = *reinterpret_cast<const BlockQ5_K*>(blk);
        ref::unpack_q5_K(b, q8);
        scales = b.scales, d = b.d, dmin = b.dmin;
      }
      for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        ref::get_scale_min_k4(j, scales, &s, &m);
        k.sc[j] = s, k.mn[j] = m;
      }
      k.group = 32, k.d = fp16_to_fp32(d), k.dmin = fp16_to_fp32(dmin);
      break;
    }
    case TensorType::Q6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
      ref::unpack_q6_K(b, q8);
      for (int j = 0; j < 16; ++j) k.sc[j] = b.scales[j];
      k.group = 16, k.d = fp16_to_fp32(b.d);
      break;
    }
    default: fail("quant::ggml: {} is not a K type", gguf::type_name(t));
  }
  for (int i = 0; i < kQK_K; ++i) k.q[i] = q8[i];
}

bool has_min(TensorType t) { return t == TensorType::Q2_K || t == TensorType::Q4_K || t == TensorType::Q5_K; }

bool is_k(TensorType t) {
  return t == TensorType::Q2_K || t == TensorType::Q3_K || t == TensorType::Q4_K || t == TensorType::Q5_K ||
         t == TensorType::Q6_K;
}

bool is_legacy(TensorType t) {
  return t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q5_0 || t == TensorType::Q5_1 ||
         t == TensorType::Q8_0;
}

// The tiled K-quant matmul (ggml-cpu/tiled, AVX-512 VNNI micro-kernel): integer sums per
// super-block, then r = s1*d (- dmin*s2), acc += r*d8 in super-block order.
float dot_k_tiled(TensorType wt, const uint8_t* w, const uint8_t* a, int64_t n) {
  const size_t wb = size_t(block_bytes(wt));
  const bool mins = has_min(wt);
  KBlock k;
  float acc = 0.0f;
  for (int64_t ib = 0; ib < n / kQK_K; ++ib, w += wb, a += sizeof(BlockQ8_K)) {
    const auto& y = *reinterpret_cast<const BlockQ8_K*>(a);
    k_unpack(wt, w, k);
    int32_t s1 = 0, s2 = 0;
    for (int g = 0; g < kQK_K / k.group; ++g) {
      int32_t raw = 0, bsum = 0;
      for (int e = g * k.group; e < (g + 1) * k.group; ++e) raw += k.q[e] * y.qs[e], bsum += y.qs[e];
      s1 += k.sc[g] * raw;
      s2 += k.mn[g] * bsum;
    }
    float r = float(s1) * k.d;
    if (mins) r = std::fma(-k.dmin, float(s2), r);
    acc = std::fma(r, y.d, acc);
  }
  return acc;
}

// ggml_vec_dot_q4_K/q5_K/q6_K_q8_K, AVX2 branch (one activation row, or a batch below the
// tiled matmul's 8): integer lane l of a super-block gathers the elements e with e%32 in
// [4l, 4l+4) times their group scale; acc_l = fma(d8*d, lane_l, acc_l); the Q4_K/Q5_K min
// term runs beside it (four lanes for Q4_K, one fused scalar for Q5_K).
float dot_k_avx2(TensorType wt, const uint8_t* w, const uint8_t* a, int64_t n) {
  const size_t wb = size_t(block_bytes(wt));
  KBlock k;
  float acc[8] = {}, acc_m[4] = {}, summs = 0.0f;
  for (int64_t ib = 0; ib < n / kQK_K; ++ib, w += wb, a += sizeof(BlockQ8_K)) {
    const auto& y = *reinterpret_cast<const BlockQ8_K*>(a);
    k_unpack(wt, w, k);
    const bool q6 = wt == TensorType::Q6_K;
    int32_t lane[8] = {};
    for (int e = 0; e < kQK_K; ++e) lane[(e % 32) / 4] += k.sc[e / k.group] * ((q6 ? k.q[e] + 32 : k.q[e]) * y.qs[e]);
    if (q6)
      for (int l = 0; l < 8; ++l) lane[l] -= 32 * (y.bsums[2 * l] * k.sc[2 * l] + y.bsums[2 * l + 1] * k.sc[2 * l + 1]);
    const float d = y.d * k.d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, float(lane[l]), acc[l]);
    if (q6) continue;
    const float dmin = -y.d * k.dmin;
    int32_t prod[4];
    for (int m = 0; m < 4; ++m)
      prod[m] = k.mn[2 * m] * (y.bsums[4 * m] + y.bsums[4 * m + 1]) + k.mn[2 * m + 1] * (y.bsums[4 * m + 2] + y.bsums[4 * m + 3]);
    if (wt == TensorType::Q4_K) {
      for (int m = 0; m < 4; ++m) acc_m[m] = std::fma(dmin, float(prod[m]), acc_m[m]);
    } else {
      summs = std::fma(dmin, float(prod[0] + prod[1] + prod[2] + prod[3]), summs);  // contracted by GCC
    }
  }
  if (wt == TensorType::Q4_K) return hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
  return hsum8(acc) + summs;
}

// The K-quant kernel llama.cpp's x86 build takes for a matmul of `rows` activation rows, or
// nullptr where it is one not copied here (Q2_K/Q3_K below 8 rows).
using KDot = float (*)(TensorType, const uint8_t*, const uint8_t*, int64_t);
KDot k_dot(TensorType wt, int64_t rows) {
  if (!is_k(wt)) return nullptr;
  if (rows >= 8) return dot_k_tiled;
  const bool avx2 = wt == TensorType::Q4_K || wt == TensorType::Q5_K || wt == TensorType::Q6_K;
  return avx2 ? dot_k_avx2 : nullptr;
}

}  // namespace

void quantize_activations(TensorType t, const float* x, void* y, int64_t n) {
  if (n % block_elems(t) != 0)
    fail("quant::ggml::quantize_activations: {} elements is not a whole number of {} blocks", n, gguf::type_name(t));
  switch (t) {
    case TensorType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(y);
      float d;
      for (int64_t i = 0; i < n / kQK; ++i) q8_block(x + i * kQK, &b[i].d, b[i].qs, &d);
      return;
    }
    case TensorType::Q8_1: {
      auto* b = static_cast<BlockQ8_1*>(y);
      for (int64_t i = 0; i < n / kQK; ++i) {
        float d;
        const int sum = q8_block(x + i * kQK, &b[i].d, b[i].qs, &d);
        b[i].s = fp32_to_fp16(d * float(sum));
      }
      return;
    }
    case TensorType::Q8_K: case TensorType::F16: case TensorType::BF16: case TensorType::F32:
      return quantize_row(t, x, y, n);
    default: fail("quant::ggml::quantize_activations: {} is not an activation type", gguf::type_name(t));
  }
}

bool dot_is_exact(TensorType wt, int64_t rows) { return is_legacy(wt) || k_dot(wt, rows) != nullptr; }

float dot(TensorType wt, const void* w, const void* a, int64_t n, int64_t rows) {
  const auto* wp = static_cast<const uint8_t*>(w);
  const auto* ap = static_cast<const uint8_t*>(a);
  if (is_legacy(wt)) {
    if (n % kQK) fail("quant::ggml::dot: {} elements is not a whole number of blocks", n);
    return dot_legacy(wt, wp, ap, n);
  }
  if (const KDot k = k_dot(wt, rows)) {
    if (n % kQK_K) fail("quant::ggml::dot: {} elements is not a whole number of blocks", n);
    return k(wt, wp, ap, n);
  }
  return vec_dot(wt, w, a, n);
}

float hsum8(const float v[8]) {
  // hsum_float_8: halves added, then (0+2, 1+3), then the two.
  const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
  return (a0 + a2) + (a1 + a3);
}

float hsum16(const float v[16]) {
  // GCC's _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, then {2,3,0,1} and the pair.
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = v[i + 8] + v[i];
  for (int i = 0; i < 4; ++i) b[i] = a[i + 4] + a[i];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

void RowDot::add(int64_t i, float a, float b) {
  if (batched_) {
    acc_[0][i % 16] = std::fma(a, b, acc_[0][i % 16]);
  } else if (i < np_) {
    acc_[(i % 64) / 16][i % 16] = std::fma(a, b, acc_[(i % 64) / 16][i % 16]);
  } else {
    tail_ += double(a * b);
  }
}

float RowDot::sum() const {
  if (batched_) return hsum16(acc_[0]);
  float x[16];
  for (int l = 0; l < 16; ++l) x[l] = (acc_[0][l] + acc_[2][l]) + (acc_[1][l] + acc_[3][l]);
  return float(double(hsum16(x)) + tail_);
}

void SoftmaxSum::add(int64_t cell, float e) {
  if (cell / 16 != chunk_) {
    if (chunk_ >= 0) total_ += double(hsum16(lanes_));
    std::memset(lanes_, 0, sizeof lanes_);
    chunk_ = cell / 16;
  }
  lanes_[cell % 16] = e;
}

double SoftmaxSum::sum() {
  if (chunk_ >= 0) total_ += double(hsum16(lanes_));
  chunk_ = -1;
  std::memset(lanes_, 0, sizeof lanes_);
  const double t = total_;
  total_ = 0.0;
  return t;
}

float expf(float x) {
  // ggml_v_expf, AVX-512 branch, one lane.
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192) return n <= 0 ? 0.0f : INFINITY;
  return std::ldexp(j, int(n));  // _mm512_scalef_ps(j, n): j * 2^n, n integral
}

float silu(float x) { return x / (1.0f + expf(0.0f - x)); }

}  // namespace loom::quant::ggml
