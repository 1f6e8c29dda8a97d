// The q8_1 activation format of the integer-dot kernels, quantized by one warp per 32
// elements (one element per lane): d = amax / 127, codes round(x / d) (ties away from zero),
// and d * sum(codes), the dequantized block's sum, for the weights' offsets and mins. One
// definition for the plain quantizer and the kernels that quantize their own output (the
// fused RMS norm, attention), so that fused and unfused steps give the same codes.
#pragma once
#include <cstdint>

#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

constexpr int kQ8Block = 32;  // elements a q8_1 block (quantize_q8_1_block: one a lane)
static_assert(kQ8Block == kWarpSize, "quantize_q8_1_block quantizes one element a lane");

// Every lane of the warp calls this with its element v; lane 0 writes the block's scales.
__device__ __forceinline__ void quantize_q8_1_block(float v, int8_t* code, float2* block_ds, int lane) {
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  const int c = int(roundf(v * id));
  *code = int8_t(c);
  const float sum = warp_sum(float(c));  // exact: |sum| <= 32 * 127
  if (lane == 0) *block_ds = make_float2(d, d * sum);
}

}  // namespace loom::backend::cuda
