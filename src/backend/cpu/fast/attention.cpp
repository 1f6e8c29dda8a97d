// Causal grouped-query attention of the fast backend, with the reference's semantics
// (reference_attention.cpp): s_j = q·k_j, soft-capped when softcap > 0, times scale; softmax
// over the keys of the query's sequence at positions p ≤ q (and q - p < window when window >
// 0); out = Σ w_j v_j. This step's keys and values are written into the cache first.
//
// One kernel for every step, prefill chunks and decode tokens alike, and batch-invariant: a
// row's result is the same bits whichever rows share its step (a request served alone or in a
// batch, its prompt in one chunk or several, after a prefix-cache hit or not). Every choice
// that could change a row's arithmetic depends only on the row's own position:
//   - the KV range is cut into chunks at multiples of `chunk` absolute positions (split-K);
//   - pass 1, per chunk: scores s_j = q·k_j (softcapped, scaled), the chunk's max m_c, and
//     p_j = exp(s_j - m_c) in place of s_j with l_c = Σ p_j over the row's part of the chunk
//     (the one exp a score gets);
//   - then M = max_c m_c, S = Σ_c l_c·exp(m_c - M) over the row's chunks in order, and per
//     chunk the factor exp(m_c - M) / S;
//   - pass 2, per chunk: w_j = p_j · factor (rounded to f16 with an f16 cache, as llama.cpp
//     rounds the normalized weights; within one chunk exactly exp(s_j - M) · (1 / S)), and
//     the chunk's partial Σ w_j v_j in ascending j;
//   - merge: the row's partial outputs summed in chunk order.
// What does depend on the batch is only how work is shared: up to `rows` (16) consecutive rows
// of one sequence form a block whose query heads (rows × heads of a kv head) read each key and
// value row once; keys outside a row's range are masked out of its sums, never added as zeros. Blocks
// of many rows (prefill): one task per (block, kv head) with its buffers in thread scratch;
// blocks of a few rows (decode): a task is one chunk of one block with all its kv heads, read
// as whole cached rows a tile at a time, so the KV range streams and every thread takes chunks.
//
// The kernels (attention_kernels.h) convert a tile of keys once for all the heads of a call
// and keep every head's sums in registers; their arithmetic per score and per output element
// is fixed by its own operands, never by the tile. Rows are read through kv_rows.h
// (contiguous runs within the cache's blocks), elements via kv_elem.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast/attention_kernels.h"
#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/kv_rows.h"
#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/vec_math.h"
#include "common/error.h"

namespace loom::backend::cpu::fast {

namespace {

using Geometry = AttentionGeometry;

constexpr int32_t kDefaultChunk = 256;  // positions per split-K chunk (schedule: attention = {chunk})
constexpr int32_t kDefaultRows = 16;   // rows of one sequence sharing each key and value read (attention = {rows})
constexpr int64_t kStreamRows = 4;     // steps whose blocks have at most this many rows (decode) stream the cache
// Positions per tile of the decode path: about 16 KiB of cached rows (8 of 2 KiB at 8 kv heads
// x 128, 16 of 1 KiB at 8 x 64, 32 of 384 B at 3 x 64), which stay in L1 while each kv head's
// kernel reads its slice of them. Single-thread micro-benchmarks over caches larger than L3:
// the best of 8, 16, 32 and 64 positions for each of those three shapes (values most).
int64_t stream_tile(size_t row_bytes) {
  return std::clamp<int64_t>(int64_t((16 << 10) / std::max<size_t>(row_bytes, 1)), 8, 32) / 4 * 4;
}

// A block of rows [t0, t0 + rows) of one sequence and one kv head: a task's queries.
struct Pair {
  int64_t t0, rows, g;
  int32_t lo, hi;        // the union of the rows' key ranges [lo, hi)
  int64_t first_chunk;   // index of its first chunk in the chunk list
  int64_t n_chunks;
  size_t scores, stats, partials;  // its places in the buffers shared by the decode passes
};

struct Chunk {
  int64_t pair;
  int32_t lo, hi;
  size_t stats;          // offset of its m_c[heads], l_c[heads] in the pair's stats
  size_t partial;        // offset of its [heads][vd] partial output in the pair's partials
};

// Everything about one step's attention call that the tasks share.
struct Job {
  const AttentionSpec& a;
  Exec& e;
  const float* q;
  float* out;
  Geometry G;            // heads: per row (the group); a pair's geometry multiplies it by rows
  int64_t group, qw, ow;
  std::vector<int32_t> lo, hi;  // each row's key range [lo, hi)
  std::vector<Pair> pairs;
  std::vector<Chunk> chunks;
  size_t score_floats = 0, stats_floats = 0, partial_floats = 0;  // the decode passes' shared buffers

  Geometry geometry(const Pair& pr) const {
    Geometry g = G;
    g.heads = pr.rows * group;
    return g;
  }
  // Row t's part of chunk c: [from, to), empty when from >= to.
  int32_t from(const Chunk& c, int64_t t) const { return std::max(c.lo, lo[size_t(t)]); }
  int32_t to(const Chunk& c, int64_t t) const { return std::min(c.hi, hi[size_t(t)]); }

  // The pair's query heads (row-major: row r's head h is r * group + h), rounded as the
  // cache's element type requires (kv_elem.h).
  void pack_queries(const Pair& pr, float* qh) const {
    for (int64_t r = 0; r < pr.rows; ++r) {
      float* dst = qh + r * group * G.hd;
      std::memcpy(dst, q + (pr.t0 + r) * qw + pr.g * group * G.hd, size_t(group * G.hd) * sizeof(float));
      if (G.elem == KvElem::f16) round_f16(dst, group * G.hd);
      if (G.elem == KvElem::q8_0)
        for (int64_t h = 0; h < group; ++h) round_q8_0(dst + h * G.hd, G.hd);
    }
  }

  // Pass 1 for chunk ci: scores of every head over the chunk's keys into sc ([heads][ld],
  // column 0 = position pr.lo; scaled by the kernel unless there is a softcap, which must see
  // the raw score), then the chunk's softmax statistics (stats below).
  void scores(int64_t ci, const float* qh, float* sc, int64_t ld, float* st, float* row) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const Geometry PG = geometry(pr);
    KvRows keys{e.kv, a.layer, e.batch.seq(pr.t0), false, G.k_stride};
    const size_t k_head = kv_row_bytes(G.elem, pr.g * G.hd);
    keys.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      scores_run(PG, qh, rows + k_head, G.k_stride, count, sc + (p0 - pr.lo), ld, row);
    });
    stats(ci, sc, ld, st);
  }

  // Chunk ci's statistics from its scores (sc as scores() leaves them): each row's softcap
  // and scale, its max m_c over its part, and the part replaced by exp(s - m_c) with its sum
  // l_c (the one exp a score gets). st: the chunk's m_c[heads], l_c[heads].
  void stats(int64_t ci, float* sc, int64_t ld, float* st) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const int64_t heads = pr.rows * group;
    for (int64_t r = 0; r < pr.rows; ++r) {
      const int32_t f = from(c, pr.t0 + r), t = to(c, pr.t0 + r);
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        st[h] = -INFINITY;
        st[heads + h] = 0.f;
        if (f >= t) continue;
        float* s = sc + h * ld + (f - pr.lo);
        const int64_t n = t - f;
        if (a.softcap > 0) {  // the kernel left the scale out: tanh takes the raw score
          for (int64_t j = 0; j < n; ++j) s[j] = std::tanh(s[j] / a.softcap) * a.softcap;
          st[h] = scale_max(s, n, a.scale);
        } else {
          st[h] = row_max(s, n);
        }
        st[heads + h] = float(exp_store_sum(s, n, st[h]));
      }
    }
  }

  // Between the passes, once per pair: each row's max M and sum S over all its chunks (in chunk
  // order), and in place of each chunk's l_c the factor exp(m_c - M) / S that turns its
  // exp(s - m_c) into normalized weights. For a row within one chunk (m_c = M) the factor is
  // exactly 1 / S: the weights are exp(s - M) * (1 / S), the reference's.
  void normalize(const Pair& pr, float* stats) const {
    const int64_t heads = pr.rows * group;
    for (int64_t r = 0; r < pr.rows; ++r)
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        float mx = -INFINITY;
        for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k)
          if (from(chunks[size_t(k)], pr.t0 + r) < to(chunks[size_t(k)], pr.t0 + r))
            mx = std::max(mx, stats[chunks[size_t(k)].stats + size_t(h)]);
        double sum = 0.0;
        for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
          const Chunk& ck = chunks[size_t(k)];
          if (from(ck, pr.t0 + r) >= to(ck, pr.t0 + r)) continue;
          const float* st = stats + ck.stats;
          sum += double(st[heads + h]) * std::exp(double(st[h]) - double(mx));
        }
        for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
          float* st = stats + chunks[size_t(k)].stats;
          st[heads + h] = float(std::exp(double(st[h]) - double(mx)) / sum);
        }
      }
  }

  // Pass 2 for chunk ci: each row's weights over its part (exp(s - m_c) times the chunk's
  // factor from normalize(); stats: the pair's) and the chunk's Σ w v into acc ([heads][vd],
  // zeroed here). ranges: room for 2 ints per head. vbuf (optional, room for the chunk's
  // [positions][vd]): the chunk's value rows converted to f32 once for all heads (the same
  // values the kernels would convert on every read), when many heads share them.
  void values(int64_t ci, float* sc, int64_t ld, const float* stats, float* acc, float* row, int32_t* ranges,
              float* vbuf) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    weights(ci, sc, ld, stats, acc);
    KvRows vals{e.kv, a.layer, e.batch.seq(pr.t0), true, G.v_stride};
    vals.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      value_rows(ci, p0, rows, count, sc, ld, acc, row, ranges, vbuf);
    });
  }

  // The start of pass 2 for chunk ci: its weights in place of its exp(s - m_c), and acc zeroed.
  void weights(int64_t ci, float* sc, int64_t ld, const float* stats, float* acc) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const int64_t heads = pr.rows * group;
    for (int64_t r = 0; r < pr.rows; ++r) {
      const int32_t f = from(c, pr.t0 + r), t = to(c, pr.t0 + r);
      if (f >= t) continue;
      for (int64_t h = r * group; h < (r + 1) * group; ++h)
        scale_weights(sc + h * ld + (f - pr.lo), t - f, stats[c.stats + size_t(heads + h)], G.elem == KvElem::f16);
    }
    std::memset(acc, 0, size_t(heads * G.vd) * sizeof(float));
  }

  // Chunk ci's Σ w v over `count` of its value rows from position p0 (row i at rows + i *
  // v_stride, the whole cached row: the pair's head is picked here), added to acc in
  // ascending position; a run cut anywhere gives the same sums (the kernels' order is the
  // positions'). ranges, vbuf: as values().
  void value_rows(int64_t ci, int32_t p0, const uint8_t* rows, int64_t count, const float* sc, int64_t ld, float* acc,
                  float* row, int32_t* ranges, float* vbuf) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const Geometry PG = geometry(pr);
    const size_t v_head = kv_row_bytes(G.elem, pr.g * G.vd);
    const HeadRanges hr = tile_ranges(ci, p0, count, ranges);
    const int32_t* rf = hr.from;
    const int32_t* rt = hr.to;
    if (!vbuf) return values_run(PG, rows + v_head, G.v_stride, count, sc + (p0 - pr.lo), ld, acc, row, {rf, rt});
    for (int64_t i = 0; i < count; ++i) kv_row_to_f32(G.elem, rows + size_t(i) * G.v_stride + v_head, vbuf + i * G.vd, G.vd);
    Geometry F = PG;
    F.elem = KvElem::f32;
    values_run(F, reinterpret_cast<const uint8_t*>(vbuf), size_t(G.vd) * sizeof(float), count, sc + (p0 - pr.lo), ld,
               acc, row, {rf, rt});
  }

  // Each head's active part of `count` positions from p0 in chunk ci (the pair's heads, row by
  // row), in ranges (room for 2 ints per head).
  HeadRanges tile_ranges(int64_t ci, int32_t p0, int64_t count, int32_t* ranges) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    int32_t* rf = ranges;
    int32_t* rt = ranges + pr.rows * group;
    for (int64_t r = 0; r < pr.rows; ++r) {
      const int32_t f = std::clamp<int32_t>(from(c, pr.t0 + r) - p0, 0, int32_t(count));
      const int32_t t = std::clamp<int32_t>(to(c, pr.t0 + r) - p0, 0, int32_t(count));
      for (int64_t h = r * group; h < (r + 1) * group; ++h) rf[h] = f, rt[h] = std::max(f, t);
    }
    return {rf, rt};
  }

  // out rows of the pair = Σ over each row's chunks, in order, of their partials (the pair's).
  void merge(const Pair& pr, const float* partials) const {
    for (int64_t r = 0; r < pr.rows; ++r) {
      float* o = out + (pr.t0 + r) * ow + pr.g * group * G.vd;
      bool first = true;
      for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
        const Chunk& ck = chunks[size_t(k)];
        if (from(ck, pr.t0 + r) >= to(ck, pr.t0 + r)) continue;
        const float* p = partials + ck.partial + size_t(r * group * G.vd);
        if (first) std::memcpy(o, p, size_t(group * G.vd) * sizeof(float));
        else
          for (int64_t i = 0; i < group * G.vd; ++i) o[i] += p[i];
        first = false;
      }
    }
  }

  // Writes the single-chunk pair's acc ([heads][vd]) to its rows' outputs.
  void write(const Pair& pr, const float* acc) const {
    for (int64_t r = 0; r < pr.rows; ++r)
      std::memcpy(out + (pr.t0 + r) * ow + pr.g * group * G.vd, acc + r * group * G.vd,
                  size_t(group * G.vd) * sizeof(float));
  }
};

}  // namespace

void run_attention(const Step& s, Exec& e) {
  const AttentionSpec& a = s.attn;
  const int64_t T = e.rows;
  if (int64_t(e.batch.size()) != T) loom::fail("%{}: attention after rows were dropped", s.op->result);
  const float* q = e.value(s.in[0]);
  const float* kx = e.value(s.in[1]);
  const float* vx = e.value(s.in[2]);
  float* out = e.value(s.out);
  const HostKvView& kv = e.kv;
  const KvElem elem = kv.elem();
  if (elem == KvElem::q8_0 && (a.head_dim % 32 || a.value_dim % 32))
    loom::fail("%{}: a q8_0 KV cache needs head widths that are multiples of 32 (head_dim {}, value_dim {}); use --kv-type f16",
               s.op->result, a.head_dim, a.value_dim);
  const int64_t kw = a.n_kv * a.head_dim, vw = a.n_kv * a.value_dim;

  parallel_rows(e, T, kw + vw, [&](int64_t b, int64_t en) {
    for (int64_t t = b; t < en; ++t) {
      const int32_t sq = e.batch.seq(t), p = e.positions[t];
      store_kv_row(elem, kx + t * kw, kv.k_row(a.layer, sq, p), kw);
      store_kv_row(elem, vx + t * vw, kv.v_row(a.layer, sq, p), vw);
    }
  });

  const int64_t group = a.n_head / a.n_kv;
  Job job{a, e, q, out, Geometry{elem, a.head_dim, a.value_dim, group, kv_row_bytes(elem, kw), kv_row_bytes(elem, vw),
                                   a.softcap > 0 ? 1.f : a.scale},
          group, a.n_head * a.head_dim, a.n_head * a.value_dim, {}, {}, {}, {}};
  const int32_t chunk = a.chunk > 0 ? a.chunk : kDefaultChunk;
  const int64_t block_rows = a.rows > 0 ? a.rows : kDefaultRows;
  job.lo.resize(size_t(T));
  job.hi.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = e.positions[t];
    job.lo[size_t(t)] = a.window > 0 ? int32_t(std::max<int64_t>(0, int64_t(p) - a.window + 1)) : 0;
    job.hi[size_t(t)] = p + 1;
  }
  // Blocks of up to block_rows consecutive rows of one sequence, each with every kv head.
  int64_t max_rows = 0;
  for (int64_t t = 0; t < T;) {
    int64_t u = t + 1;
    while (u < T && u - t < block_rows && e.batch.seq(u) == e.batch.seq(t)) ++u;
    max_rows = std::max(max_rows, u - t);
    int32_t lo = job.lo[size_t(t)], hi = job.hi[size_t(t)];
    for (int64_t r = t + 1; r < u; ++r) lo = std::min(lo, job.lo[size_t(r)]), hi = std::max(hi, job.hi[size_t(r)]);
    const int64_t heads = (u - t) * group;
    for (int64_t g = 0; g < a.n_kv; ++g) {
      Pair pr{t, u - t, g, lo, hi, int64_t(job.chunks.size()), 0, job.score_floats, job.stats_floats, job.partial_floats};
      for (int32_t c = lo; c < hi; c = (c / chunk + 1) * chunk) {
        const size_t k = size_t(pr.n_chunks++);
        job.chunks.push_back({int64_t(job.pairs.size()), c, std::min<int32_t>(hi, (c / chunk + 1) * chunk),
                              k * size_t(2 * heads), k * size_t(heads * a.value_dim)});
      }
      job.score_floats += size_t(heads * (hi - lo));
      job.stats_floats += size_t(2 * heads * pr.n_chunks);
      if (pr.n_chunks > 1) job.partial_floats += size_t(heads * a.value_dim * pr.n_chunks);
      job.pairs.push_back(pr);
    }
    t = u;
  }

  const int64_t row_floats = std::max(a.head_dim, a.value_dim);
  // Chunk ci's weights and values (stats, partials: its pair's; acc: room for [heads][vd]): a
  // pair of one chunk writes its rows' outputs, else the chunk's partial.
  auto pass2 = [&](int64_t ci, float* sc, const float* st, float* partials, float* acc, float* row, float* vbuf) {
    const Chunk& c = job.chunks[size_t(ci)];
    const Pair& pr = job.pairs[size_t(c.pair)];
    thread_local std::vector<int32_t> ranges;
    if (ranges.size() < size_t(2 * pr.rows * group)) ranges.resize(size_t(2 * pr.rows * group));
    if (pr.n_chunks > 1) acc = partials + c.partial;
    job.values(ci, sc, pr.hi - pr.lo, st, acc, row, ranges.data(), vbuf);
    if (pr.n_chunks == 1) job.write(pr, acc);
  };

  // Blocks of many rows (prefill): one task per pair, its scores, stats and partials in thread
  // scratch (nothing the size of the whole step's scores goes through memory). Handed out last
  // pair first: a causal block's cost grows with its position, so the threads start on the
  // largest tasks and end on the smallest, instead of one thread finishing the largest alone.
  if (max_rows > kStreamRows) {
    e.pool.for_each(int64_t(job.pairs.size()), [&](int64_t pi, int thread) {
      const Pair& pr = job.pairs[job.pairs.size() - 1 - size_t(pi)];
      const int64_t heads = pr.rows * group, ld = pr.hi - pr.lo;
      const size_t stats = size_t(2 * heads * pr.n_chunks);
      const size_t parts = pr.n_chunks > 1 ? size_t(pr.n_chunks * heads * a.value_dim) : 0;
      const size_t vbuf = pr.rows > 1 ? size_t(std::min<int32_t>(chunk, pr.hi - pr.lo) * a.value_dim) : 0;
      float* qh = e.scratch_for(thread, size_t(heads * (a.head_dim + ld + a.value_dim)) + stats + parts + size_t(row_floats) + vbuf);
      float* sc = qh + heads * a.head_dim;
      float* acc = sc + heads * ld;
      float* st = acc + heads * a.value_dim;
      float* part = st + stats;
      float* row = part + parts;
      job.pack_queries(pr, qh);
      for (int64_t c = pr.first_chunk; c < pr.first_chunk + pr.n_chunks; ++c)
        job.scores(c, qh, sc, ld, st + job.chunks[size_t(c)].stats, row);
      job.normalize(pr, st);
      for (int64_t c = pr.first_chunk; c < pr.first_chunk + pr.n_chunks; ++c)
        pass2(c, sc, st, part, acc, row, vbuf ? row + row_floats : nullptr);
      if (pr.n_chunks > 1) job.merge(pr, part);
    });
    return;
  }

  // Decode (blocks of a few rows): a task is one chunk of positions of one block with all its
  // kv heads (or a share of them when there are too few chunks to keep every thread busy), and
  // walks the chunk a tile of positions at a time, every head of the task per tile: the cached
  // rows hold all kv heads side by side, so a task reads whole rows front to back (a stream)
  // instead of one head's slice of each row, and every thread streams its own chunks. A tile
  // is one kernel call for all the task's kv heads (scores_rows / values_rows): a tile is only
  // 8 keys of each kv head at the qwen3 shape, and one call per kv head spent about a fifth of
  // the pass in dispatch and range set-up (loom-attention-bench, cache-resident: 26.5 -> 21
  // ns per key and kv head). The
  // passes share buffers owned by the calling thread (the pool's thread 0): per-thread
  // scratch cannot hold data one task writes and another reads. A score's and an output's
  // arithmetic is the per-pair path's (the kernels' order is the positions', however a run is
  // cut), so the two paths give the same bits.
  thread_local std::vector<float> shared;
  const size_t need = job.score_floats + job.stats_floats + job.partial_floats;
  if (shared.size() < need) shared.resize(need);
  float* scores = shared.data();
  float* stats = scores + job.score_floats;
  float* partials = stats + job.stats_floats;
  struct Task {
    int64_t first_pair, n_pairs, k;  // chunk k of pairs [first_pair, first_pair + n_pairs) (one block's)
  };
  std::vector<Task> tasks;
  const int64_t n_tasks = int64_t(job.chunks.size()) / a.n_kv;
  const int64_t split = std::clamp<int64_t>((4 * e.pool.size() + n_tasks - 1) / std::max<int64_t>(n_tasks, 1), 1, a.n_kv);
  for (size_t b = 0; b < job.pairs.size(); b += size_t(a.n_kv))
    for (int64_t k = 0; k < job.pairs[b].n_chunks; ++k)
      for (int64_t j = 0; j < split; ++j) {
        const int64_t g0 = a.n_kv * j / split, g1 = a.n_kv * (j + 1) / split;
        tasks.push_back({int64_t(b) + g0, g1 - g0, k});
      }
  // fn(p, rows, n): each tile of n positions from p of the task's chunk (row i at rows + i *
  // stride: whole cached rows, from the first byte of the task's first kv head).
  auto walk = [&](const Task& t, bool values, auto&& fn) {
    const Pair& p0 = job.pairs[size_t(t.first_pair)];
    const Chunk& c0 = job.chunks[size_t(p0.first_chunk + t.k)];
    const size_t stride = values ? job.G.v_stride : job.G.k_stride;
    const size_t head = kv_row_bytes(elem, p0.g * (values ? a.value_dim : a.head_dim));
    const int64_t tile = stream_tile(stride);
    KvRows{e.kv, a.layer, e.batch.seq(p0.t0), values, stride}.runs(c0.lo, c0.hi, [&](int32_t p, const uint8_t* rows, int64_t count) {
      for (int64_t i = 0; i < count; i += tile) fn(int32_t(p + i), rows + size_t(i) * stride + head, std::min(tile, count - i));
    });
  };
  // The pairs of a task are consecutive kv heads of one block: their scores (heads x ld each)
  // follow one another, and so do their accumulators, acc_stride apart.
  e.pool.for_each(int64_t(tasks.size()), [&](int64_t ti, int thread) {
    const Task& t = tasks[size_t(ti)];
    const Pair& p0 = job.pairs[size_t(t.first_pair)];
    const int64_t heads = p0.rows * group, ld = p0.hi - p0.lo;
    float* qh = e.scratch_for(thread, size_t(t.n_pairs * heads * a.head_dim + row_floats));
    float* row = qh + t.n_pairs * heads * a.head_dim;
    for (int64_t j = 0; j < t.n_pairs; ++j) job.pack_queries(job.pairs[size_t(t.first_pair + j)], qh + j * heads * a.head_dim);
    const Geometry PG = job.geometry(p0);
    float* sc = scores + p0.scores;  // column 0: position p0.lo
    walk(t, false, [&](int32_t p, const uint8_t* rows, int64_t n) {
      scores_rows(PG, t.n_pairs, qh, rows, job.G.k_stride, n, sc + (p - p0.lo), ld, row);
    });
    for (int64_t pi = t.first_pair; pi < t.first_pair + t.n_pairs; ++pi) {
      const Pair& pr = job.pairs[size_t(pi)];
      const int64_t ci = pr.first_chunk + t.k;
      job.stats(ci, scores + pr.scores, pr.hi - pr.lo, stats + pr.stats + job.chunks[size_t(ci)].stats);
    }
  });
  for (const Pair& pr : job.pairs) job.normalize(pr, stats + pr.stats);  // a few heads: not worth a section
  e.pool.for_each(int64_t(tasks.size()), [&](int64_t ti, int thread) {
    const Task& t = tasks[size_t(ti)];
    const Pair& p0 = job.pairs[size_t(t.first_pair)];
    const int64_t heads = p0.rows * group, ld = p0.hi - p0.lo;
    float* own = e.scratch_for(thread, size_t(t.n_pairs * heads * a.value_dim + row_floats + 2 * heads));
    float* row = own + t.n_pairs * heads * a.value_dim;
    int32_t* ranges = reinterpret_cast<int32_t*>(row + row_floats);  // 2 ints per head
    // Each pair's sums: its chunk's partial, or (a pair of one chunk) its own accumulators.
    const int64_t ci0 = p0.first_chunk + t.k;
    float* acc = p0.n_chunks > 1 ? partials + p0.partials + job.chunks[size_t(ci0)].partial : own;
    const int64_t acc_stride = heads * a.value_dim * (p0.n_chunks > 1 ? p0.n_chunks : 1);
    for (int64_t j = 0; j < t.n_pairs; ++j) {
      const Pair& pr = job.pairs[size_t(t.first_pair + j)];
      job.weights(pr.first_chunk + t.k, scores + pr.scores, ld, stats + pr.stats, acc + j * acc_stride);
    }
    const Geometry PG = job.geometry(p0);
    const float* w = scores + p0.scores;
    walk(t, true, [&](int32_t p, const uint8_t* rows, int64_t n) {
      values_rows(PG, t.n_pairs, rows, job.G.v_stride, n, w + (p - p0.lo), ld, acc, acc_stride, row,
                  job.tile_ranges(ci0, p, n, ranges));
    });
    for (int64_t j = 0; j < t.n_pairs; ++j) {
      const Pair& pr = job.pairs[size_t(t.first_pair + j)];
      if (pr.n_chunks == 1) job.write(pr, acc + j * acc_stride);
    }
  });
  e.pool.for_each(int64_t(job.pairs.size()), [&](int64_t pi, int) {
    const Pair& pr = job.pairs[size_t(pi)];
    if (pr.n_chunks > 1) job.merge(pr, partials + pr.partials);
  });
}

}  // namespace loom::backend::cpu::fast
