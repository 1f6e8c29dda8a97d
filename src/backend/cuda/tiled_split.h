#pragma once
// How the tiled f16 matmul (matmul_mma_tiled.cu) splits K over blocks. Plain C++, so that its
// test runs in every build (tiled_split_test.cpp).
#include <algorithm>
#include <cstdint>

namespace loom::backend::cuda {

// The slices K is split into for `tiles` row tiles of `chunks` chunks each, with `resident`
// blocks on the device at once and room for max_slices slices of partial sums: the fewest waves
// of blocks times a slice's chunks plus one (the stages' fill), over 1 .. max_slices; the
// fewer slices on a tie. Rounding the blocks up to fill the SMs, as the first cut did, put the 8B
// down projection at 64 rows (32 tiles, 56 chunks) in 160 blocks on 132 SMs: two waves of 12
// chunks where 128 blocks of 14 take one.
inline int64_t tiled_slices(int64_t tiles, int64_t chunks, int64_t resident, int64_t max_slices) {
  int64_t best = 1, best_cost = -1;
  resident = std::max<int64_t>(resident, 1);
  for (int64_t s = 1; s <= std::min(chunks, max_slices); ++s) {
    const int64_t per = (chunks + s - 1) / s, made = (chunks + per - 1) / per;  // slices of `per` chunks
    const int64_t cost = (tiles * made + resident - 1) / resident * (per + 1);
    if (best_cost < 0 || cost < best_cost) best = made, best_cost = cost;
  }
  return best;
}

}  // namespace loom::backend::cuda
