#pragma once
// Where the tiled f16 matmul (matmul_mma_tiled.cu) runs, and how it splits K over blocks. Plain
// C++, so that its test runs in every build (tiled_split_test.cpp).
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

// Whether the tiled kernel is the faster one for a launch of `rows` activation rows on weights
// of `tiles` output tiles (128 rows; a gated launch's 64 outputs) with rows of K elements, on
// `sms` SMs (MmaTiles::where_faster; tiled_pays adds whether its stages fit). Measured (run 19,
// H100, kernel bench, µs against the int8 kernel, the faster of its K splits): at 32 and 64 rows
// it wins where its tiles fill half the SMs (gate/up 14336 x 4096 95 against 104 and 116 against
// 201, the 8B output head 387 against 494 and 470 against 776) and on narrow weights of long
// rows, which it splits over K in one wave (the down projection, 4096 x 14336: 57 against 69 and
// 72 against 94); not on narrow weights of short rows (4096 x 4096 at 64 rows 34 against 25,
// 1024 x 4096 33 against 24), nor at 8 rows (gate/up 75 against 61). Between 8 and 32 rows
// nothing was measured; gate/up's two points cross near 22, so it starts past 24.
inline bool tiled_faster(int64_t rows, int64_t tiles, int64_t K, int64_t sms) {
  return rows > 24 && (2 * tiles >= sms || K > 8192);
}

}  // namespace loom::backend::cuda
