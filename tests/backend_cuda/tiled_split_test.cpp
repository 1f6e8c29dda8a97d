// Where the tiled f16 matmul runs, its split of K over blocks and the bytes it stages a chunk
// (tiled_split.h): plain C++, runs in every build.
#include <gtest/gtest.h>

#include "backend/cuda/tiled_split.h"

namespace loom::backend::cuda {
namespace {

constexpr int64_t kSms = 132;  // an H100 or H200, one block of the tiled kernel an SM

int64_t waves(int64_t blocks) { return (blocks + kSms - 1) / kSms; }

// The 8B shape's narrow projections at 64 rows (chunks of 256 elements; slots for 2 x 132
// slices of partial sums): each split fills one wave, where the first cut's rule (the blocks
// rounded up to fill the SMs) made two for q/k/v and down.
TEST(TiledSplit, NarrowWeightsTakeOneWave) {
  struct Case {
    const char* what;
    int64_t tiles, chunks;
  };
  for (const Case c : {Case{"o, 4096 x 4096", 32, 16}, Case{"q/k/v, 6144 x 4096", 48, 16},
                       Case{"down, 4096 x 14336", 32, 56}}) {
    SCOPED_TRACE(c.what);
    const int64_t s = tiled_slices(c.tiles, c.chunks, kSms, 2 * kSms / c.tiles);
    EXPECT_GT(s, 1);
    EXPECT_EQ(waves(c.tiles * s), 1) << s << " slices";
    const int64_t old = std::min({c.chunks, (kSms + c.tiles - 1) / c.tiles, 2 * kSms / c.tiles});
    const int64_t per = (c.chunks + s - 1) / s, old_per = (c.chunks + old - 1) / old;
    EXPECT_LE(waves(c.tiles * s) * per, waves(c.tiles * ((c.chunks + old_per - 1) / old_per)) * old_per);
  }
}

// Launches of a wave of row tiles or more are not split (the 8B gate/up at 224 tiles, the
// output head at 1,002), nor K of one chunk; a split never passes the slots or the chunks.
TEST(TiledSplit, StaysWithinItsSlotsAndChunks) {
  EXPECT_EQ(tiled_slices(224, 16, kSms, 2 * kSms / 224), 1);
  EXPECT_EQ(tiled_slices(1002, 16, kSms, 0), 1);
  EXPECT_EQ(tiled_slices(3, 1, kSms, 88), 1);
  for (int64_t tiles = 1; tiles <= 300; tiles += 7)
    for (int64_t chunks = 1; chunks <= 64; chunks += 5) {
      const int64_t slots = 2 * kSms / tiles, s = tiled_slices(tiles, chunks, kSms, slots);
      ASSERT_GE(s, 1);
      ASSERT_LE(s, std::max<int64_t>(1, std::min(chunks, slots))) << tiles << " tiles, " << chunks << " chunks";
    }
}

// The launches of the 8B shape's batched decode take the kernel that run 21's kernel bench
// measured faster (tiled_split.h): the tiled one for gate/up, the output head and down, the int8
// one for q/k/v and o (rows of 4,096), at every row count (8, 16, 32 and 64 rows measured).
TEST(TiledSplit, TakesTheLaunchesMeasuredFaster) {
  struct Launch {
    const char* what;
    int64_t tiles, K;
    bool tiled;
  };
  for (const Launch l : {Launch{"gate/up, 2 x 14336 x 4096 (gated: 64 outputs a tile)", 224, 4096, true},
                         Launch{"14336 x 4096", 112, 4096, true}, Launch{"output head, 128256 x 4096", 1002, 4096, true},
                         Launch{"down, 4096 x 14336", 32, 14336, true}, Launch{"o, 4096 x 4096", 32, 4096, false},
                         Launch{"q/k/v, 6144 x 4096", 48, 4096, false}, Launch{"k, 1024 x 4096", 8, 4096, false}}) {
    SCOPED_TRACE(l.what);
    EXPECT_EQ(tiled_faster(l.tiles, l.K, kSms), l.tiled);
  }
}

// A whole chunk's staged bytes as the kernel copies them (whole_chunk_source: straight-line
// pieces, version 14e) are chunk_span's, byte for byte, for every weight type the kernel takes,
// rows of 1 to 40 blocks of 256 elements and one more legacy block (a part-filled last chunk),
// every chunk: the quant bytes from c bpc qb, the other bytes' 16-aligned window (Q6_K's
// 18-byte runs start off 16 in every other block) after them; the window stays in the packed row.
TEST(TiledSplit, WholeChunkStagesChunkSpansBytes) {
  using gguf::TensorType;
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q4_K,
                       TensorType::Q5_K, TensorType::Q6_K}) {
    const PackedLayout P = packed_layout(t);
    for (int64_t K = 256; K <= 40 * 256 + 32; K += (K % 256 ? 224 : 32)) {
      if (K % P.elems) continue;
      const RowLayout L = row_layout(t, K);
      const int64_t row_bytes = int64_t(packed_row_bytes(t, K)), chunks = (K / 32 + kChunkGroups - 1) / kChunkGroups;
      int whole = 0;
      for (int c = 0; c < chunks; ++c) {
        SCOPED_TRACE(::testing::Message() << gguf::type_name(t) << " K " << K << " chunk " << c);
        const ChunkSpan s = chunk_span(L, c);
        if (!whole_chunk(L, c)) {
          EXPECT_EQ(c, chunks - 1) << "only a last chunk is part-filled";
          EXPECT_LT(s.nq, L.bpc * L.qb);
          continue;
        }
        ++whole;
        const WholeChunk h = whole_chunk_source(L, c);
        ASSERT_EQ(h.bytes, s.nq + s.nwin);
        ASSERT_EQ(h.bytes % 16, 0);
        ASSERT_LE(h.bytes, kMaxStride);
        for (int o = 0; o < h.bytes; o += 16) {
          const int64_t want = o < s.nq ? s.qoff + o : s.alo + o - s.nq;
          const int64_t got = o + (o < L.bpc * L.qb ? h.qo : h.ao);
          ASSERT_EQ(got, want) << "staged byte " << o;
          ASSERT_LE(got + 16, row_bytes);
        }
      }
      EXPECT_EQ(whole, K / 256) << gguf::type_name(t) << " K " << K;
    }
  }
}

}  // namespace
}  // namespace loom::backend::cuda
