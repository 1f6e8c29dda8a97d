// The scale searches ggml's K-quant reference quantizers use (no importance matrix). Kept in
// one place because several block types share them; the float expressions keep ggml's exact
// evaluation order, which is what makes the output bit-identical (the module is compiled
// with -ffp-contract=off so no multiply-add is fused behind our back).
#pragma once
#include <cstdint>
#include <cstring>

namespace loom::quant::ref {

constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest (ties to even) by the 1.5*2^23 trick, exactly as ggml's nearest_int.
inline int nearest_int(float fval) {
  float val = fval + 12582912.f;
  int i;
  std::memcpy(&i, &val, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// Symmetric scale for n values into [-nmax, nmax-1]; L gets l + nmax. rmse_type 1 with
// qw == nullptr (weights x^2) is the only form the reference quantizers use.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);
// Q3_K's symmetric search with iterative refinement (do_rmse) ; L gets l + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);
// Asymmetric scale + min search for n values into [0, nmax]; *the_min gets -min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

// Unpacks group j's 6-bit scale and min from Q4_K/Q5_K's 12 packed bytes.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// Unpacks Q3_K's 16 6-bit scales (still biased by +32) from its 12 packed bytes.
inline int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

}  // namespace loom::quant::ref
