// Matmul steps of the fast backend: y_p = x · W_pᵀ for every part p of a step, all reading the
// same activation x. x is quantized once into the format simd::gemm wants (act_type of the
// weights, e.g. Q8_K for Q4_K/Q6_K) and reused by every part and every later step that reads
// it. The work is cut into tiles of (weight rows × activation rows) handed out dynamically:
//  - steps of at most Step::stream_rows activation rows (decode, batched decode: the schedule's
//    `matmul_stream_rows`): every tile holds all activation rows and about
//    kStreamTilesPerThread tiles per thread of equal weight bytes (at least kStreamMinTileBytes):
//    the weights are read once per step in long contiguous streams, the threads get equal
//    shares (the small q/k/v and o matrices of a 135M model cut into 128-row prefill tiles
//    leave one thread idle for a third of their time), and a few tiles per thread still let
//    one thread take over from another that the OS has descheduled;
//  - longer steps (prefill): tiles of kPrefillRows weight rows × kPrefillActs activation rows
//    (the kernel re-prepares its activation rows per call, so long activation blocks amortize
//    that), so a tile's weights stay in L1/L2 while all of its activation rows pass over them.
// Either way each output's arithmetic is the same (quant/simd kernels are invariant to the
// call's shape), so the cut never changes a row's bits.
// Weights with an x8 layout (MatmulPart::packed, quant/simd/packed.h) are read from it for
// their first packed_rows rows; tile row counts are multiples of 8, so a tile is all packed
// groups, all tail rows, or groups then the tail. Weights kept in stored rows are read as
// stored by steps of at most kStoredRowsActs rows (fewest bytes) and from their prefill copy
// (repack.h: the same bits) by longer ones.
#include <algorithm>
#include <atomic>

#include "backend/cpu/fast/plan.h"
#include "common/error.h"
#include "quant/quant.h"
#include "quant/simd/kernels.h"
#include "quant/simd/packed.h"

namespace loom::backend::cpu::fast {

namespace {

constexpr int64_t kStoredRowsActs = 8;  // at most this many rows read stored rows rather than the prefill copy
constexpr int64_t kStreamTilesPerThread = 4;
constexpr int64_t kStreamMinTileBytes = 32 << 10;
constexpr int64_t kPrefillRows = 128;  // the kernels chunk it further for L1; 64 re-prepared activations twice as often (-3..-12% on packed GEMM)
constexpr int64_t kPrefillActs = 256;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

void run_matmul(const Step& s, Exec& e) {
  const int64_t n_act = e.rows, k = s.k;
  if (n_act == 0) return;
  const float* x = e.value(s.in[0]);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t act_rb = size_t(k) * sizeof(float);
  if (s.act_slot >= 0) {
    uint8_t* q = e.quant(s.act_slot);
    act_rb = loom::quant::row_size(s.act_type, k);
    if (s.quantize)
      parallel_rows(e, n_act, 2 * k, [&](int64_t b, int64_t en) {
        for (int64_t r = b; r < en; ++r) loom::quant::simd::quantize_activations(s.act_type, x + r * k, q + r * act_rb, k);
      });
    act = q;
  }

  // Names this step's activation bytes for the kernels (gemm_packed's act_version): they do not
  // change while the step runs, and no other step gets the same number.
  static std::atomic<uint64_t> act_versions{0};
  const uint64_t act_version = ++act_versions;

  // Tile geometry per part; tiles are numbered activation-block-major so that threads work on
  // the same activation block at the same time.
  const bool stream = n_act <= s.stream_rows;
  const bool decode = n_act <= kStoredRowsActs;
  const int64_t act_block = stream ? n_act : kPrefillActs;
  const int64_t n_ablocks = (n_act + act_block - 1) / act_block;
  constexpr int kMaxParts = 8;
  int64_t chunk_rows[kMaxParts], first_chunk[kMaxParts + 1];
  const int n_parts = int(s.parts.size());
  int64_t total_bytes = 0;
  for (const auto& mp : s.parts) total_bytes += mp.rows * int64_t(mp.row_bytes);
  const int64_t tile_bytes = std::max(kStreamMinTileBytes, total_bytes / (kStreamTilesPerThread * e.pool.size()));
  first_chunk[0] = 0;
  for (int p = 0; p < n_parts; ++p) {
    const MatmulPart& mp = s.parts[p];
    chunk_rows[p] = stream ? std::max<int64_t>(16, round_up(tile_bytes / int64_t(mp.row_bytes), 16)) : kPrefillRows;
    chunk_rows[p] = std::min(chunk_rows[p], mp.rows);
    first_chunk[p + 1] = first_chunk[p] + (mp.rows + chunk_rows[p] - 1) / chunk_rows[p];
  }
  const int64_t chunks_per_ablock = first_chunk[n_parts];
  float* outs[kMaxParts];
  for (int p = 0; p < n_parts; ++p) outs[p] = e.value(s.parts[p].out);

  e.pool.for_each(chunks_per_ablock * n_ablocks, [&](int64_t tile, int) {
    const int64_t ab = tile / chunks_per_ablock, c = tile % chunks_per_ablock;
    int p = 0;
    while (first_chunk[p + 1] <= c) ++p;
    const MatmulPart& mp = s.parts[p];
    const int64_t r0 = (c - first_chunk[p]) * chunk_rows[p], r1 = std::min(mp.rows, r0 + chunk_rows[p]);
    const int64_t a0 = ab * act_block, a1 = std::min(n_act, a0 + act_block);
    float* o = outs[p] + a0 * mp.rows;
    const uint8_t* xa = act + size_t(a0) * act_rb;
    int64_t r = r0;
    if (r < mp.packed_rows) {  // x8 groups (chunk sizes are multiples of 8)
      const int64_t pe = std::min(r1, mp.packed_rows);
      loom::quant::simd::gemm_packed(mp.type, mp.packed + size_t(r / 8) * mp.packed_group_bytes, pe - r, xa, act_rb,
                                     a1 - a0, o + r, size_t(mp.rows), k, act_version);
      r = pe;
    }
    if (r < r1) {
      const gguf::TensorType wt = decode ? mp.type : mp.prefill_type;
      const uint8_t* wd = decode ? mp.data : mp.prefill_data;
      const size_t wrb = decode ? mp.row_bytes : mp.prefill_row_bytes;
      loom::quant::simd::gemm(wt, wd + size_t(r) * wrb, wrb, r1 - r, xa, act_rb, a1 - a0, o + r, size_t(mp.rows), k);
    }
  });
}

}  // namespace loom::backend::cpu::fast
