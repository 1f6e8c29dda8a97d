// Decode attention of the fast backend (also any step the prefill block kernel does not take):
// split-K over the KV range, so that one sequence's keys and values are streamed by every
// thread, in two passes that keep llama.cpp's rounding of the normalized softmax weights.
//
// Each task is one chunk of kChunk positions (aligned to absolute positions, so the split and
// hence the results do not depend on the thread count) for one (query row, kv head), and
// serves every query head of the group at once: each key and value row is read once.
//   pass 1: scores s_j = q·k_j of the chunk (softcapped, scaled) into a shared buffer, with the
//           chunk's max m_c and Σ exp(s_j - m_c) = l_c;
//   pass 2: M = max_c m_c and S = Σ_c l_c·exp(m_c - M) from every chunk's pair (cheap, in chunk
//           order), w_j = exp(s_j - M) / S (rounded to f16 with an f16 cache, as llama.cpp
//           rounds the normalized weights), and the chunk's Σ w_j v_j;
//   merge:  the chunks' partial outputs summed in chunk order.
// A row with one chunk runs both passes in one task and writes its output directly.
// Against one pass over all keys, only the association of S and of Σ w v changes (fp32 level);
// every weight is still exp(s_j - M)/S of the global max and sum, rounded as before.
//
// The kernels read rows as 16 keys at a time: the 16 dot products of a head are reduced
// together by a transpose-add tree (no horizontal sum per key), values accumulate in registers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/kv_rows.h"
#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/vec_math.h"
#include "common/error.h"

namespace loom::backend::cpu::fast {

namespace {

constexpr int32_t kChunk = 256;  // positions per task

struct Geometry {
  KvElem elem;
  int64_t hd, vd, group;
  size_t k_stride, v_stride;  // bytes per cached row
  size_t k_head(int64_t g) const { return kv_row_bytes(elem, g * hd); }
  size_t v_head(int64_t g) const { return kv_row_bytes(elem, g * vd); }
};

// ---- scalar kernels (every build; every head width) ----

void scores_scalar(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                   int64_t ld, float* row) {
  for (int64_t i = 0; i < count; ++i) {
    kv_row_to_f32(G.elem, rows + size_t(i) * stride, row, G.hd);
    for (int64_t h = 0; h < G.group; ++h) {
      float s = 0.f;
      for (int64_t d = 0; d < G.hd; ++d) s += q[h * G.hd + d] * row[d];
      sc[h * ld + i] = s;
    }
  }
}

void values_scalar(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                   float* acc, float* row) {
  for (int64_t i = 0; i < count; ++i) {
    kv_row_to_f32(G.elem, rows + size_t(i) * stride, row, G.vd);
    for (int64_t h = 0; h < G.group; ++h) {
      const float wh = w[h * ld + i];
      for (int64_t d = 0; d < G.vd; ++d) acc[h * G.vd + d] += wh * row[d];
    }
  }
}

#if defined(__AVX512F__)

// 16 columns [c, c + 16) of a cached row (c a multiple of 16) as f32.
template <KvElem E>
inline __m512 load16(const uint8_t* row, int64_t c) {
  if constexpr (E == KvElem::f32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (E == KvElem::f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + c)));
  } else {
    const auto* b = reinterpret_cast<const loom::quant::BlockQ8_0*>(row) + c / 32;
    const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + c % 32)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(_cvtsh_ss(b->d)));
  }
}

// r[i] = Σ lanes of v[i], for 16 vectors: pairs of vectors are folded into one by adding their
// halves, four times (15 shuffle pairs and adds for 16 sums).
inline __m512 reduce16_unordered(const __m512* v) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 4; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int i = 0; i < 2; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The tree leaves the sums in a fixed lane order; this permutation puts sum i in lane i.
inline __m512i reduce16_order() {
  static const __m512i order = [] {
    __m512 v[16];
    for (int i = 0; i < 16; ++i) v[i] = _mm512_set1_ps(float(i));
    alignas(64) float lane[16];
    _mm512_store_ps(lane, reduce16_unordered(v));
    alignas(64) int32_t idx[16];
    for (int l = 0; l < 16; ++l) idx[int(lane[l] / 16.0f)] = l;
    return _mm512_load_si512(idx);
  }();
  return order;
}

// sc[h * ld + i] = q_h · k_i for the run's rows, 16 keys at a time. ND = head_dim / 16.
template <KvElem E, int ND>
void scores_avx512(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                   int64_t ld) {
  constexpr int kMaxGroup = 16;
  alignas(64) __m512 tile[kMaxGroup * 16];
  const __m512i order = reduce16_order();
  for (int64_t h0 = 0; h0 < G.group; h0 += kMaxGroup) {
    const int64_t nh = std::min<int64_t>(kMaxGroup, G.group - h0);
    for (int64_t i0 = 0; i0 < count; i0 += 16) {
      const int64_t nk = std::min<int64_t>(16, count - i0);
      for (int64_t u = 0; u < 16; ++u) {
        if (u >= nk) {
          for (int64_t h = 0; h < nh; ++h) tile[h * 16 + u] = _mm512_setzero_ps();
          continue;
        }
        const uint8_t* r = rows + size_t(i0 + u) * stride;
        __m512 k[ND];
        for (int d = 0; d < ND; ++d) k[d] = load16<E>(r, 16 * d);
        for (int64_t h = 0; h < nh; ++h) {
          const float* qh = q + (h0 + h) * (16 * ND);
          __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(qh), k[0]), a1 = _mm512_setzero_ps();
          for (int d = 1; d < ND; ++d) {
            if (d % 2) a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * d), k[d], a1);
            else a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * d), k[d], a0);
          }
          tile[h * 16 + u] = _mm512_add_ps(a0, a1);
        }
      }
      const __mmask16 m = __mmask16((1u << nk) - 1);
      for (int64_t h = 0; h < nh; ++h)
        _mm512_mask_storeu_ps(sc + (h0 + h) * ld + i0, m, _mm512_permutexvar_ps(order, reduce16_unordered(tile + h * 16)));
    }
  }
}

// acc[h][c0 + ...] += Σ_i w[h * ld + i] v_i for NH heads from h0 and NC·16 columns from c0.
template <KvElem E, int NC, int NH>
void values_tile(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, int64_t h0, int64_t c0) {
  __m512 a[NH][NC];
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) a[h][c] = _mm512_loadu_ps(acc + (h0 + h) * G.vd + c0 + 16 * c);
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* r = rows + size_t(i) * stride;
    __m512 v[NC];
    for (int c = 0; c < NC; ++c) v[c] = load16<E>(r, c0 + 16 * c);
    for (int h = 0; h < NH; ++h) {
      const __m512 wh = _mm512_set1_ps(w[(h0 + h) * ld + i]);
      for (int c = 0; c < NC; ++c) a[h][c] = _mm512_fmadd_ps(wh, v[c], a[h][c]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(acc + (h0 + h) * G.vd + c0 + 16 * c, a[h][c]);
}

template <KvElem E, int NC>
void values_cols(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, int64_t c0) {
  // Accumulators NH x NC plus the row's NC vectors stay within the 32 registers.
  constexpr int kHeads = NC >= 8 ? 2 : 4;
  int64_t h = 0;
  for (; h + kHeads <= G.group; h += kHeads) values_tile<E, NC, kHeads>(G, rows, stride, count, w, ld, acc, h, c0);
  for (; h + 2 <= G.group; h += 2) values_tile<E, NC, 2>(G, rows, stride, count, w, ld, acc, h, c0);
  for (; h < G.group; ++h) values_tile<E, NC, 1>(G, rows, stride, count, w, ld, acc, h, c0);
}

template <KvElem E>
void values_avx512(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                   float* acc) {
  int64_t c = 0;
  for (; c + 128 <= G.vd; c += 128) values_cols<E, 8>(G, rows, stride, count, w, ld, acc, c);
  for (; c + 64 <= G.vd; c += 64) values_cols<E, 4>(G, rows, stride, count, w, ld, acc, c);
  for (; c + 16 <= G.vd; c += 16) values_cols<E, 1>(G, rows, stride, count, w, ld, acc, c);
}

template <KvElem E>
bool scores_avx512_dispatch(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                            float* sc, int64_t ld) {
  switch (G.hd) {
    case 32: scores_avx512<E, 2>(G, q, rows, stride, count, sc, ld); return true;
    case 64: scores_avx512<E, 4>(G, q, rows, stride, count, sc, ld); return true;
    case 128: scores_avx512<E, 8>(G, q, rows, stride, count, sc, ld); return true;
    case 256: scores_avx512<E, 16>(G, q, rows, stride, count, sc, ld); return true;
    default: return false;
  }
}
#endif

void scores_run(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                int64_t ld, float* row) {
#if defined(__AVX512F__)
  switch (G.elem) {
    case KvElem::f32: if (scores_avx512_dispatch<KvElem::f32>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::f16: if (scores_avx512_dispatch<KvElem::f16>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::q8_0: if (scores_avx512_dispatch<KvElem::q8_0>(G, q, rows, stride, count, sc, ld)) return; break;
  }
#endif
  scores_scalar(G, q, rows, stride, count, sc, ld, row);
}

void values_run(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                float* acc, float* row) {
#if defined(__AVX512F__)
  if (G.vd % 16 == 0) {
    switch (G.elem) {
      case KvElem::f32: return values_avx512<KvElem::f32>(G, rows, stride, count, w, ld, acc);
      case KvElem::f16: return values_avx512<KvElem::f16>(G, rows, stride, count, w, ld, acc);
      case KvElem::q8_0: return values_avx512<KvElem::q8_0>(G, rows, stride, count, w, ld, acc);
    }
  }
#endif
  values_scalar(G, rows, stride, count, w, ld, acc, row);
}

// One (query row, kv head) and its chunks' places in the shared buffers.
struct Pair {
  int64_t t, g;
  int32_t lo, hi;        // positions [lo, hi)
  int64_t first_chunk;   // index of its first chunk in the chunk list
  int64_t n_chunks;
  size_t scores;         // offset of its [group][hi - lo] scores
};

struct Chunk {
  int64_t pair;
  int32_t lo, hi;
  size_t partial;        // offset of its [group][vd] partial output (chunked pairs only)
};

}  // namespace

void run_attention_decode(const AttentionSpec& a, Exec& e, const float* q, float* out) {
  const int64_t T = e.rows;
  const HostKvView& kv = e.kv;
  const Geometry G{kv.elem(), a.head_dim, a.value_dim, a.n_head / a.n_kv, kv_row_bytes(kv.elem(), a.n_kv * a.head_dim),
                   kv_row_bytes(kv.elem(), a.n_kv * a.value_dim)};
  const int64_t qw = a.n_head * a.head_dim, ow = a.n_head * a.value_dim;

  std::vector<Pair> pairs;
  std::vector<Chunk> chunks;
  size_t score_floats = 0, partial_floats = 0;
  pairs.reserve(size_t(T * a.n_kv));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = e.positions[t];
    const int32_t lo = a.window > 0 ? int32_t(std::max<int64_t>(0, int64_t(p) - a.window + 1)) : 0;
    for (int64_t g = 0; g < a.n_kv; ++g) {
      Pair pr{t, g, lo, p + 1, int64_t(chunks.size()), 0, score_floats};
      for (int32_t c = lo; c < pr.hi; c = (c / kChunk + 1) * kChunk) {
        chunks.push_back({int64_t(pairs.size()), c, std::min<int32_t>(pr.hi, (c / kChunk + 1) * kChunk), 0});
        ++pr.n_chunks;
      }
      if (pr.n_chunks > 1)
        for (int64_t c = pr.first_chunk; c < pr.first_chunk + pr.n_chunks; ++c) {
          chunks[c].partial = partial_floats;
          partial_floats += size_t(G.group * G.vd);
        }
      score_floats += size_t(G.group * (pr.hi - pr.lo));
      pairs.push_back(pr);
    }
  }
  // Shared by the tasks of this call, owned by the calling thread (the pool's thread 0): the
  // per-thread scratch cannot hold data one task writes and another reads.
  thread_local std::vector<float> shared;
  const size_t stats_floats = chunks.size() * size_t(2 * G.group);  // m_c, l_c per head
  if (shared.size() < score_floats + partial_floats + stats_floats) shared.resize(score_floats + partial_floats + stats_floats);
  float* scores = shared.data();
  float* partials = scores + score_floats;
  float* stats = partials + partial_floats;

  // The task's query heads, rounded as the cache's element type requires (kv_elem.h).
  auto query = [&](const Pair& pr, int thread, float*& row) {
    float* qh = e.scratch_for(thread, size_t(G.group * G.hd + std::max(G.hd, G.vd)));
    row = qh + G.group * G.hd;
    std::memcpy(qh, q + pr.t * qw + pr.g * G.group * G.hd, size_t(G.group * G.hd) * sizeof(float));
    if (G.elem == KvElem::f16) round_f16(qh, G.group * G.hd);
    if (G.elem == KvElem::q8_0)
      for (int64_t h = 0; h < G.group; ++h) round_q8_0(qh + h * G.hd, G.hd);
    return qh;
  };
  auto pass1 = [&](int64_t ci, int thread) {
    const Chunk& c = chunks[ci];
    const Pair& pr = pairs[c.pair];
    float* row;
    const float* qh = query(pr, thread, row);
    const int64_t ld = pr.hi - pr.lo;
    float* sc = scores + pr.scores + (c.lo - pr.lo);
    KvRows keys{kv, a.layer, e.batch.seq(pr.t), false, G.k_stride};
    keys.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      scores_run(G, qh, rows + G.k_head(pr.g), G.k_stride, count, sc + (p0 - c.lo), ld, row);
    });
    const int64_t n = c.hi - c.lo;
    float* st = stats + ci * 2 * G.group;
    for (int64_t h = 0; h < G.group; ++h) {
      float* s = sc + h * ld;
      if (a.softcap > 0)
        for (int64_t j = 0; j < n; ++j) s[j] = std::tanh(s[j] / a.softcap) * a.softcap;
      for (int64_t j = 0; j < n; ++j) s[j] *= a.scale;
      st[h] = max_of(s, n);
      st[G.group + h] = float(exp_sum(s, n, st[h]));
    }
  };
  auto pass2 = [&](int64_t ci, int thread) {
    const Chunk& c = chunks[ci];
    const Pair& pr = pairs[c.pair];
    const int64_t ld = pr.hi - pr.lo, n = c.hi - c.lo;
    float* w = scores + pr.scores + (c.lo - pr.lo);
    for (int64_t h = 0; h < G.group; ++h) {
      float mx = -INFINITY;
      for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) mx = std::max(mx, stats[k * 2 * G.group + h]);
      double sum = 0.0;
      for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
        const float* st = stats + k * 2 * G.group;
        sum += double(st[G.group + h]) * std::exp(double(st[h]) - double(mx));
      }
      float* wh = w + h * ld;
      exp_shifted(wh, n, mx);
      const float inv = float(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) wh[j] *= inv;
      if (G.elem == KvElem::f16) round_f16(wh, n);
    }
    const int64_t row_floats = std::max(G.hd, G.vd);
    float* row = e.scratch_for(thread, size_t(row_floats + G.group * G.vd));
    float* acc = pr.n_chunks > 1 ? partials + c.partial : row + row_floats;
    std::memset(acc, 0, size_t(G.group * G.vd) * sizeof(float));
    KvRows vals{kv, a.layer, e.batch.seq(pr.t), true, G.v_stride};
    vals.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      values_run(G, rows + G.v_head(pr.g), G.v_stride, count, w + (p0 - c.lo), ld, acc, row);
    });
    if (pr.n_chunks == 1)
      for (int64_t h = 0; h < G.group; ++h)
        std::memcpy(out + pr.t * ow + (pr.g * G.group + h) * G.vd, acc + h * G.vd, size_t(G.vd) * sizeof(float));
  };

  if (chunks.size() == pairs.size()) {  // one chunk per row and kv head: no merge
    e.pool.for_each(int64_t(chunks.size()), [&](int64_t ci, int thread) {
      pass1(ci, thread);
      pass2(ci, thread);
    });
    return;
  }
  e.pool.for_each(int64_t(chunks.size()), pass1);
  e.pool.for_each(int64_t(chunks.size()), pass2);
  for (const Pair& pr : pairs) {
    if (pr.n_chunks == 1) continue;
    float* o = out + pr.t * ow + pr.g * G.group * G.vd;
    const float* p0 = partials + chunks[pr.first_chunk].partial;
    std::memcpy(o, p0, size_t(G.group * G.vd) * sizeof(float));
    for (int64_t c = pr.first_chunk + 1; c < pr.first_chunk + pr.n_chunks; ++c) {
      const float* pc = partials + chunks[c].partial;
      for (int64_t i = 0; i < G.group * G.vd; ++i) o[i] += pc[i];
    }
  }
}

}  // namespace loom::backend::cpu::fast
