#pragma once
// Where the tiled f16 matmul (matmul_mma_tiled.cu) runs, how it splits K over blocks, and which
// bytes of a weight row it stages for a chunk. Plain C++ (the layout's functions are also device
// functions under nvcc), so that its test runs in every build (tiled_split_test.cpp).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/packed_layout.h"

#if defined(__CUDACC__)
#define LOOM_TILED_HD __host__ __device__
#else
#define LOOM_TILED_HD
#endif

namespace loom::backend::cuda {

constexpr int kChunkGroups = 8;  // 32-element groups a chunk (a stage of the tiled kernel)
constexpr int kMaxStride = 288;   // the widest staged row chunk (Q6_K, Q8_0; staged_stride)

// A row's staged bytes in the packed layout, per weight type: a chunk is bpc blocks; the quant
// bytes of chunk c are [c bpc qb, + bpc qb) (fewer in a last, part-filled chunk), the other
// bytes of the repacked types start at aux + c bpc ab and are copied as the 16-byte-aligned
// window around them (Q6_K's 18-byte runs are not 16-aligned; a row is padded to 16 bytes, so
// the window stays inside it). 32-bit offsets: a row is far below 2 GiB.
struct RowLayout {
  int bpc, qb, ab, nb, aux;  // blocks a chunk, quant and other bytes a block, blocks a row, aux start
  bool repacked;
};
struct ChunkSpan {
  int qoff, nq, alo, nwin, skew;
};
LOOM_TILED_HD inline RowLayout row_layout(gguf::TensorType t, int64_t K) {
  const PackedLayout L = packed_layout(t);
  const int nb = int(K / L.elems);
  return {kChunkGroups * 32 / L.elems, L.quant_bytes, L.aux_bytes(), nb, nb * L.quant_bytes, L.repacked};
}
LOOM_TILED_HD inline ChunkSpan chunk_span(const RowLayout& L, int c) {
  const int b0 = c * L.bpc, n = std::min(L.bpc, L.nb - b0);
  ChunkSpan s{b0 * L.qb, n * L.qb, 0, 0, 0};
  if (L.repacked) {
    const int a0 = L.aux + b0 * L.ab;
    s.alo = a0 & ~15;
    s.nwin = ((a0 + n * L.ab + 15) & ~15) - s.alo;
    s.skew = a0 - s.alo;
  }
  return s;
}

// A whole chunk (every K-quant chunk; a legacy type's but the last of a row whose K is not a
// multiple of 256) as the kernel stages it: `bytes` staged bytes (the quant bytes, then the
// window of the others), staged byte o (a multiple of 16) coming from row byte o + qo below
// bpc qb and o + ao past it. The same bytes as chunk_span's, without its minimum.
struct WholeChunk {
  int bytes, qo, ao;
};
LOOM_TILED_HD inline bool whole_chunk(const RowLayout& L, int c) { return (c + 1) * L.bpc <= L.nb; }
LOOM_TILED_HD inline WholeChunk whole_chunk_source(const RowLayout& L, int c) {
  const int nq = L.bpc * L.qb, ab = L.bpc * L.ab, a0 = L.aux + c * ab, alo = a0 & ~15;
  return {nq + (L.repacked ? ((a0 + ab + 15) & ~15) - alo : 0), c * nq, alo - nq};
}

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

// Whether the tiled kernel is the faster one for a launch on weights of `tiles` output tiles (128
// rows; a gated launch's 64 outputs) with rows of K elements, on `sms` SMs, at any row count
// (MmaTiles::where_faster; tiled_pays adds whether its stages fit). Both kernels work in seq tiles
// of 8 rows (the tiled one in launches of 1, 2, 4 or 8 of them), so 8, 16, 32 and 64 rows stand
// for every count. Measured (run 21, H100, kernel bench of version 14e, µs against the int8
// kernel, the faster of its K splits), the same answer at every count:
// - it wins where its tiles fill half the SMs (gate/up 14336 x 4096 at 8 rows 56.2 against 61.8,
//   at 64 104.4 against 202.0; the 8B output head 240.9 against 345.4, 424.0 against 777.8) and
//   on narrow weights of long rows, which it splits over K in one wave (down, 4096 x 14336: 37.9
//   against 44.5, 66.9 against 95.3);
// - never on narrow weights of short rows (4096 x 4096 at 8 rows 16.4 against 12.3, at 64 32.4
//   against 25.3; 1024 x 4096 alike).
// Run 20's version 14d lost gate/up at 8 rows (63.3 against 61.8), so the rule then kept launches
// of 8 rows or fewer off wide weights of short rows unless they were four waves of tiles.
inline bool tiled_faster(int64_t tiles, int64_t K, int64_t sms) { return K > 8192 || 2 * tiles >= sms; }

}  // namespace loom::backend::cuda
