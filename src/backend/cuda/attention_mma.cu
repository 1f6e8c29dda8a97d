// Prompt attention on tensor cores (version 9 of docs/cuda-kernels.md). The scalar kernel of
// attention.cu gives each (row, query head) a block whose warps take one position at a time,
// with a shuffle tree per score: ~25 instructions a position a warp, for every row. Here a
// warp takes a tile of up to 16 rows of the step and one query head (the A operand of
// mma.m16n8k16), and 16 positions a pass:
//   - scores S = Q K^T: the queries converted to f16 once (the A fragments stay in registers),
//     each lane loading its B fragments (two halves of one key) straight from the paged pool,
//     2 x head_dim / 16 MMAs a pass with f32 sums;
//   - softcap, scale, the causal / window mask and the online softmax in f32 on the score
//     fragments (base 2; a row's 16 scores lie in the 4 lanes of a quad);
//   - O += P V with P converted to f16 from the score registers (the C layout of two n8 tiles
//     is the A layout of one k16 tile), V's B fragments gathered as half pairs of two keys,
//     head_dim / 8 MMAs a pass; O stays in f32 registers.
// The tiles are the host's (StepTables::tiles: each run of one sequence's rows cut into tiles
// of at most 16, so that decode rows beside a prompt take a warp each rather than queueing in
// one) or, without them, 16 consecutive rows. A tile of rows of several sequences takes them one
// sequence at a time (the other rows masked), so any tiling is computed correctly. Consecutive
// warps of a block take consecutive query heads of the same tile, so a GQA group's keys and
// values are read from L1 after the first.
// The MMA is inline PTX for sm_80+; other devices (and a HIP port) keep the scalar kernel
// (attention() asks mma_device()).
#include <cuda_fp16.h>

#include <climits>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kTile = 16;  // rows a warp: the MMA's M
constexpr int kKeys = 16;  // positions a pass: two n8 tiles of scores, the P V MMA's K
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t half2_bits(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }
__device__ __forceinline__ uint32_t pack(float lo, float hi) { return half2_bits(__floats2half2_rn(lo, hi)); }
__device__ __forceinline__ uint32_t bits32(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

constexpr int kQuad = 4;  // the lanes holding one fragment row (warp.cuh's lanes_max / lanes_sum)
__device__ __forceinline__ int warp_min_int(int v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = min(v, shfl_xor(v, o));
  return v;
}
__device__ __forceinline__ int warp_max_int(int v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = max(v, shfl_xor(v, o));
  return v;
}

// One of a lane's two fragment rows (g and g + 8 of the tile).
struct Row {
  int seq = -1, pos = -1, lo = 0;
  bool done = true;
  __device__ void load(const AttentionShape& a, const StepTables& st, int64_t r, int64_t end) {
    if (r >= end) return;
    seq = st.seq_of_row[r], pos = st.pos_of_row[r], done = false;
    lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  }
};

// The shared-memory staging of a pass's keys and values (two passes: the next one's copies in
// flight), rows padded by 16 bytes so that the 8 rows of an ldmatrix matrix fall on different
// banks; a token array for kernels that read the pool directly.
template <int HD, bool kShared> struct KvStage {
  __half k[2][kKeys][HD + 8], v[2][kKeys][HD + 8];
};
template <int HD> struct KvStage<HD, false> {
  __half k[1][1][8], v[1][1][8];
};

template <int HD, bool kShared>
__global__ void __launch_bounds__(kWarps * kWarpSize)
    attention_mma_kernel(AttentionShape a, KvView kv, StepTables st, const float* __restrict__ q, float* out,
                         int64_t rows, int8_t* __restrict__ q8, float2* __restrict__ q8_ds) {
  constexpr int KT = HD / 16;  // k tiles of the scores' MMAs
  constexpr int NT = HD / 8;   // n tiles of the output's MMAs
  allow_next_kernel();
  wait_previous_kernel();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t task = int64_t(blockIdx.x) * kWarps + warp;
  const int64_t tiles = st.tiles ? st.tile_slots : (rows + kTile - 1) / kTile;
  if (task >= tiles * a.n_head) return;  // kShared: the block's 4 warps are one tile's, all or none
  const int h = int(task % a.n_head), kvh = h / (a.n_head / a.n_kv);
  const int64_t tile = task / a.n_head;
  // The tile's rows [r0, end): the host's tile, or 16 consecutive rows.
  const int32_t entry = st.tiles ? st.tiles[tile] : 0;
  const int64_t r0 = st.tiles ? int64_t(entry >> 5) : tile * kTile;
  const int64_t end = st.tiles ? r0 + (entry & 31) : min(r0 + kTile, rows);
  if (end <= r0) return;  // a slot past the step's tiles (the whole block, as above)
  const int g = lane / 4, t = lane % 4;
  Row ra, rb;
  ra.load(a, st, r0 + g, end);
  rb.load(a, st, r0 + g + 8, end);

  uint32_t qf[KT][4];
  {
    const float* qa = q + ((r0 + g) * a.n_head + h) * int64_t(HD) + 2 * t;
    const float* qb = qa + 8 * int64_t(a.n_head) * HD;
    const float2 zero = make_float2(0.f, 0.f);
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const float2 a0 = ra.done ? zero : *reinterpret_cast<const float2*>(qa + kt * 16);
      const float2 b0 = rb.done ? zero : *reinterpret_cast<const float2*>(qb + kt * 16);
      const float2 a1 = ra.done ? zero : *reinterpret_cast<const float2*>(qa + kt * 16 + 8);
      const float2 b1 = rb.done ? zero : *reinterpret_cast<const float2*>(qb + kt * 16 + 8);
      qf[kt][0] = pack(a0.x, a0.y), qf[kt][1] = pack(b0.x, b0.y), qf[kt][2] = pack(a1.x, a1.y), qf[kt][3] = pack(b1.x, b1.y);
    }
  }
  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  // Running maxima (base 2) of rows g and g + 8, and this lane's share of their sums.
  float ma = -INFINITY, mb = -INFINITY, la = 0.f, lb = 0.f;
  const float scale2 = a.scale * kLog2e;
  const int64_t koff = int64_t(kvh) * HD;
  __shared__ __align__(16) KvStage<HD, kShared> sm;

  for (;;) {  // one pass per sequence among the tile's rows (uniform across the warp)
    const LaneMask wa = ballot(!ra.done), wb = ballot(!rb.done);
    if (!(wa | wb)) break;
    const int s = wa ? shfl(ra.seq, first_lane(wa)) : shfl(rb.seq, first_lane(wb));
    const bool ina = !ra.done && ra.seq == s, inb = !rb.done && rb.seq == s;
    const int jlo = warp_min_int(min(ina ? ra.lo : INT_MAX, inb ? rb.lo : INT_MAX));
    const int jhi = warp_max_int(max(ina ? ra.pos : -1, inb ? rb.pos : -1));
    // One pass of 16 positions from j0 up to the probabilities, given this lane's key words
    // (kf): the scores, their mask, the online softmax (o rescaled), and P as the A fragment of
    // the P V MMAs (pf), which the caller issues with its value words (positions j0 + 2t, + 1 and
    // + 8, + 9 at element g of each n tile).
    auto scores = [&](int j0, const uint32_t (&kf)[2][KT][2], uint32_t (&pf)[4]) {
      float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        mma_f16(sc[0], qf[kt], kf[0][kt][0], kf[0][kt][1]);
        mma_f16(sc[1], qf[kt], kf[1][kt][0], kf[1][kt][1]);
      }
      // sc[n][e]: row g (e < 2) or g + 8, position j0 + 8n + 2t + (e & 1).
      float xa = -INFINITY, xb = -INFINITY;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = j0 + 8 * n + 2 * t + (e & 1);
          const Row& r = e < 2 ? ra : rb;
          const bool in = (e < 2 ? ina : inb) && j >= r.lo && j <= r.pos;
          float x = sc[n][e];
          if (a.softcap > 0) x = tanhf(x / a.softcap) * a.softcap;
          x = in ? x * scale2 : -INFINITY;
          sc[n][e] = x;
          if (e < 2) xa = fmaxf(xa, x);
          else xb = fmaxf(xb, x);
        }
      const float na = fmaxf(ma, lanes_max<kQuad>(xa)), nb = fmaxf(mb, lanes_max<kQuad>(xb));
      // A row with nothing yet and nothing now keeps its zeros (no -inf - -inf).
      const float ca = na == -INFINITY ? 1.f : exp2f(ma - na), cb = nb == -INFINITY ? 1.f : exp2f(mb - nb);
      ma = na, mb = nb, la *= ca, lb *= cb;
#pragma unroll
      for (int n = 0; n < NT; ++n) o[n][0] *= ca, o[n][1] *= ca, o[n][2] *= cb, o[n][3] *= cb;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = sc[n][e];
          const float p = x == -INFINITY ? 0.f : exp2f(x - (e < 2 ? ma : mb));
          sc[n][e] = p;
          if (e < 2) la += p;
          else lb += p;
        }
      pf[0] = pack(sc[0][0], sc[0][1]), pf[1] = pack(sc[0][2], sc[0][3]), pf[2] = pack(sc[1][0], sc[1][1]),
      pf[3] = pack(sc[1][2], sc[1][3]);
    };
    uint32_t pf[4];
    uint32_t kw[2][KT][2];
    if constexpr (kShared) {
      // The block's 4 warps (4 heads of one KV head, the same rows: the host checks) stage each
      // pass's 16 keys and values in shared memory, the next pass's copies in flight during this
      // one (cp.async), and take their fragments by ldmatrix. Rows padded by 16 bytes: the 8 rows
      // of an 8x8 matrix fall on different banks.
      constexpr int kChunks = HD / 8;  // 16-byte pieces a row
      auto stage = [&](int buf, int j0) {
        for (int i = int(threadIdx.x); i < 2 * kKeys * kChunks; i += kWarps * kWarpSize) {
          const int which = i / (kKeys * kChunks), r = i % (kKeys * kChunks) / kChunks, c = i % kChunks;
          const int64_t row = kv_row(st, s, min(j0 + r, jhi), kv.block_size);  // past jhi: jhi's, masked
          if (which) cp_async16(&sm.v[buf][r][8 * c], kv.v + row * kv.v_width + koff + 8 * c);
          else cp_async16(&sm.k[buf][r][8 * c], kv.k + row * kv.k_width + koff + 8 * c);
        }
        cp_async_commit();
      };
      const int m = lane / 8, mr = lane % 8;  // the matrix and row this lane addresses
      stage(0, jlo);
      int buf = 0;
      for (int j0 = jlo; j0 <= jhi; j0 += kKeys) {
        const bool more = j0 + kKeys <= jhi;  // uniform across the block
        if (more) {
          stage(buf ^ 1, j0 + kKeys);
          cp_async_wait<1>();
        } else {
          cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {  // matrices: positions 0-7 / 8-15 x dims 16kt.. / 16kt + 8..
          uint32_t r[4];
          ldmatrix_x4<false>(r, &sm.k[buf][8 * (m / 2) + mr][16 * kt + 8 * (m % 2)]);
          kw[0][kt][0] = r[0], kw[0][kt][1] = r[1], kw[1][kt][0] = r[2], kw[1][kt][1] = r[3];
        }
        scores(j0, kw, pf);
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          // Matrices: n tiles n, n + 1 x positions 0-7 / 8-15, transposed (a column pair a lane).
          uint32_t vr[4];
          ldmatrix_x4<true>(vr, &sm.v[buf][8 * (m % 2) + mr][8 * (n + m / 2)]);
          mma_f16(o[n], pf, vr[0], vr[1]);
          mma_f16(o[n + 1], pf, vr[2], vr[3]);
        }
        __syncthreads();  // every warp is done with buf before the next stage writes it
        buf ^= 1;
      }
    } else {
      // This lane's key words of a pass (rows j0 + g and j0 + 8 + g; positions past jhi, the
      // pass's last, read jhi's row and are masked) and its value halves (positions j0 + 2t, + 1,
      // + 8, + 9 at element g of each n tile).
      auto load_k = [&](int j0, uint32_t (&kf)[2][KT][2]) {
        const __half* k0 = kv.k + kv_row(st, s, min(j0 + g, jhi), kv.block_size) * kv.k_width + koff + 2 * t;
        const __half* k1 = kv.k + kv_row(st, s, min(j0 + 8 + g, jhi), kv.block_size) * kv.k_width + koff + 2 * t;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          kf[0][kt][0] = bits32(k0 + kt * 16), kf[0][kt][1] = bits32(k0 + kt * 16 + 8);
          kf[1][kt][0] = bits32(k1 + kt * 16), kf[1][kt][1] = bits32(k1 + kt * 16 + 8);
        }
      };
      auto v_row = [&](int j) { return kv.v + kv_row(st, s, min(j, jhi), kv.block_size) * kv.v_width + koff + g; };
      auto v_words = [](const __half* v0, const __half* v1, int n) {
        return half2_bits(__halves2half2(v0[8 * n], v1[8 * n]));
      };
      // Head sizes up to 128 keep the next pass's keys in flight during this pass's arithmetic
      // and load this pass's values before its scores (a pass is a chain of dependent loads,
      // MMAs and shuffles, and a prompt step runs few warps an SM); 256 has no registers for them.
      constexpr bool kAhead = HD <= 128;
      if constexpr (kAhead) load_k(jlo, kw);
      for (int j0 = jlo; j0 <= jhi; j0 += kKeys) {
        const __half *v0 = v_row(j0 + 2 * t), *v1 = v_row(j0 + 2 * t + 1), *v2 = v_row(j0 + 2 * t + 8),
                     *v3 = v_row(j0 + 2 * t + 9);
        uint32_t vw[kAhead ? NT : 1][2], kn[2][KT][2];
        if constexpr (kAhead) {
#pragma unroll
          for (int n = 0; n < NT; ++n) vw[n][0] = v_words(v0, v1, n), vw[n][1] = v_words(v2, v3, n);
          if (j0 + kKeys <= jhi) load_k(j0 + kKeys, kn);
        } else {
          load_k(j0, kw);
        }
        scores(j0, kw, pf);
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          if constexpr (kAhead) mma_f16(o[n], pf, vw[n][0], vw[n][1]);
          else mma_f16(o[n], pf, v_words(v0, v1, n), v_words(v2, v3, n));
        }
        if constexpr (kAhead) {
          if (j0 + kKeys <= jhi)
#pragma unroll
            for (int kt = 0; kt < KT; ++kt)
              kw[0][kt][0] = kn[0][kt][0], kw[0][kt][1] = kn[0][kt][1], kw[1][kt][0] = kn[1][kt][0],
              kw[1][kt][1] = kn[1][kt][1];
        }
      }
    }
    ra.done = ra.done || ina;
    rb.done = rb.done || inb;
  }

  la = lanes_sum<kQuad>(la), lb = lanes_sum<kQuad>(lb);
  const int64_t row_a = r0 + g, row_b = row_a + 8;
  float* oa = out + (row_a * a.n_head + h) * int64_t(HD) + 2 * t;
  float* ob = oa + 8 * int64_t(a.n_head) * HD;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    if (row_a < end) *reinterpret_cast<float2*>(oa + 8 * n) = make_float2(o[n][0] / la, o[n][1] / la);
    if (row_b < end) *reinterpret_cast<float2*>(ob + 8 * n) = make_float2(o[n][2] / lb, o[n][3] / lb);
  }
  if (!q8) return;
  // The output's q8_1 codes, a 32-element block at a time across the warp (as quantize_q8_1 of
  // `out` would), from what the warp has just written.
  __syncwarp();
  for (int64_t r = r0; r < end; ++r) {
    const int64_t e0 = (r * a.n_head + h) * int64_t(HD);
#pragma unroll
    for (int c = 0; c < HD; c += kQ8Block)
      quantize_q8_1_block(out[e0 + c + lane], q8 + e0 + c + lane, q8_ds + (e0 + c) / kQ8Block, lane);
  }
}

template <int HD>
void launch_mma(bool shared, dim3 grid, dim3 block, cudaStream_t s, const AttentionShape& a, const KvView& kv,
                const StepTables& st, const float* q, float* out, int64_t rows, int8_t* q8, float2* q8_ds) {
  if (shared) launch(attention_mma_kernel<HD, true>, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds);
  else launch(attention_mma_kernel<HD, false>, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds);
}

}  // namespace

int64_t attention_tiles(const int32_t* seq_of_row, int64_t rows, int32_t* tiles) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows;) {
    int64_t e = r + 1;
    while (e < rows && e - r < kTile && seq_of_row[e] == seq_of_row[r]) ++e;
    tiles[n++] = int32_t(r << 5 | (e - r));
    r = e;
  }
  return n;
}

bool has_attention_mma(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

void attention_mma(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                   int64_t rows, cudaStream_t s, int8_t* q8, float2* q8_ds) {
  if (a.n_kv <= 0 || a.n_head % a.n_kv) cuda_invalid("attention_mma: n_head must be a multiple of n_kv_head");
  if (a.head_dim != a.value_dim || !has_attention_mma(a.head_dim))
    cuda_invalid("attention_mma: head_dim must equal value_dim and be 32, 64, 96, 128 or 256");
  if (!mma_device()) cuda_invalid("attention_mma: the device has no f16 MMA (sm_80 or later)");
  if (rows <= 0) return;
  const int64_t warps = (st.tiles ? st.tile_slots : (rows + kTile - 1) / kTile) * a.n_head;
  if (warps <= 0) return;
  const dim3 grid(unsigned((warps + kWarps - 1) / kWarps)), block(kWarps * kWarpSize);
  // Keys and values staged in shared memory (a.mma_shared_kv) where a block's 4 warps are 4
  // query heads of one KV head over the same tile (so they run the same passes), for head sizes
  // up to 128, with 16-byte aligned KV rows.
  const bool shared = a.mma_shared_kv && a.head_dim <= 128 && a.n_head % kWarps == 0 &&
                      (a.n_head / a.n_kv) % kWarps == 0 && kv.k_width % 8 == 0 && kv.v_width % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(kv.k) % 16 == 0 && reinterpret_cast<uintptr_t>(kv.v) % 16 == 0;
  switch (a.head_dim) {
    case 32: launch_mma<32>(shared, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds); break;
    case 64: launch_mma<64>(shared, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds); break;
    case 96: launch_mma<96>(shared, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds); break;
    case 128: launch_mma<128>(shared, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds); break;
    default: launch(attention_mma_kernel<256, false>, grid, block, s, a, kv, st, q, out, rows, q8, q8_ds); break;
  }
}

}  // namespace loom::backend::cuda
