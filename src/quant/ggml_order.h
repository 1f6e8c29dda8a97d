// llama.cpp's CPU arithmetic on x86-64, in its order, as scalar code: what ggml-cpu computes
// at run time (its AVX2/AVX-512 kernels, llamafile's tinyBLAS, the tiled K-quant matmul), not
// its scalar *_ref/*_generic functions. Float sums are associated the way those kernels'
// vector lanes and horizontal adds associate them, so the reference backend's values are
// llama.cpp's bit for bit wherever the integer parts are exact (they are: block dots are
// integer sums) and the float steps are the ones written here.
//
//   quantize_activations(t, x, y, n)  f32 row -> activation type t as ggml-cpu's from_float:
//       Q8_0/Q8_1 as quantize_row_q8_0/q8_1 (AVX): id = 127/amax, ties to even, s = d*Σq;
//       Q8_K as quantize_row_q8_K (= the reference); F16 nearest-even; F32 copied.
//   dot(wt, w, a, n, rows)            one output of a matmul whose activation has `rows` rows:
//       Q4_0/Q4_1/Q5_0/Q5_1/Q8_0: eight lanes (lane l = elements 4l..4l+3 of each 32-block),
//         acc_l = fma(dw*da, Σ_l, acc_l) over blocks, folded as hsum_float_8 -- the AVX2
//         vec_dot and tinyBLAS_Q0_AVX alike; Q4_1/Q5_1 add Σ m*s (fused) after the fold.
//       Q2_K..Q6_K with rows >= 8: the tiled matmul (AVX-512 VNNI): per super-block r =
//         Σsc·Σqa · d (− dmin·Σm·bsum, fused), acc = fma(r, d8, acc) in super-block order.
//       Q4_K/Q5_K/Q6_K with rows < 8: the AVX2 vec_dot's eight integer lanes (element e in lane
//         (e%32)/4), acc_l = fma(d8*d, lane_l, acc_l), hsum_float_8, plus the min term.
//       Q2_K/Q3_K below 8 rows, F32, F16, BF16: quant::vec_dot (ggml's generic order; not exact).
//   expf(x)                           ggml_v_expf (AVX-512 variant) for one lane.
//   silu(x)                           ggml_v_silu: x / (1 + ggml_v_expf(-x)).
//   hsum8 / hsum16                    _mm256 hsum_float_8 and GCC's _mm512_reduce_add_ps.
//   RowDot, SoftmaxSum                the attention's f16 dots and softmax sum (below).
#pragma once
#include <cstdint>

#include "gguf/tensor_type.h"

namespace loom::quant::ggml {

void quantize_activations(gguf::TensorType t, const float* x, void* y, int64_t n);
float dot(gguf::TensorType wt, const void* w, const void* a, int64_t n, int64_t rows);
// True when dot(wt, ..., rows) follows llama.cpp's x86 order exactly.
bool dot_is_exact(gguf::TensorType wt, int64_t rows);

float expf(float x);
float silu(float x);
float hsum8(const float v[8]);
float hsum16(const float v[16]);

// Σ a_i·b_i over i in [0, n) associated as ggml's f16/f32 row dots associate it, fed term by
// term in increasing i; a term with a zero factor may be left out (it changes no lane).
//   batched (a matmul of >= 2 rows, llamafile tinyBLAS<16>): lane i%16, fma chain, hsum16;
//   otherwise ggml_vec_dot_f16 (AVX-512): four 16-lane accumulators over 64-element steps,
//   folded (0+2, 1+3, 0+1) and reduced, the n%64 leftovers added in double.
class RowDot {
 public:
  RowDot(bool batched, int64_t n) : batched_(batched), np_(n & ~int64_t(63)) {}
  void add(int64_t i, float a, float b);
  float sum() const;

 private:
  bool batched_;
  int64_t np_;
  float acc_[4][16] = {};
  double tail_ = 0.0;
};

// ggml_vec_soft_max_f32's sum: exp values summed in float 16 at a time (hsum16 of cells
// 16c..16c+15), the chunk sums in double; fed in increasing cell order, zeros may be left out.
class SoftmaxSum {
 public:
  void add(int64_t cell, float e);
  double sum();

 private:
  int64_t chunk_ = -1;
  float lanes_[16] = {};
  double total_ = 0.0;
};

}  // namespace loom::quant::ggml
