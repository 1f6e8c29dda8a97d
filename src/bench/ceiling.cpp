#include "bench/ceiling.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bench {

double Work::kv_bytes_at(int64_t pos) const {
  double b = 0;
  for (const KvLayerRead& l : kv) b += l.row_bytes * double(l.window > 0 ? std::min(pos + 1, l.window) : pos + 1);
  return b;
}

double Work::decode_bytes_at(int64_t depth, int64_t n) const {
  n = std::max<int64_t>(1, n);
  double kvb = 0;
  for (int64_t i = 0; i < n; ++i) kvb += kv_bytes_at(depth + i);
  return decode_bytes + kvb / double(n);
}

Work work_per_token(const ir::Module& m, const gguf::File& f, loom::backend::KvElem kv_elem) {
  Work w;
  for (const ir::Func& fn : m.funcs) {
    size_t last_attention = fn.body.size();  // none: every row goes through every matmul
    for (size_t i = 0; i < fn.body.size(); ++i)
      if (fn.body[i].opcode == "attention") last_attention = i;
    for (size_t i = 0; i < fn.body.size(); ++i) {
      const ir::Op& op = fn.body[i];
      if (op.opcode == "attention") {
        const int64_t n_kv = ir::attr_int(op.attrs, "n_kv_head");
        const int64_t hd = ir::attr_int(op.attrs, "head_dim"), vd = ir::attr_int(op.attrs, "value_dim");
        w.kv.push_back({double(loom::backend::kv_row_bytes(kv_elem, n_kv * hd) + loom::backend::kv_row_bytes(kv_elem, n_kv * vd)),
                        ir::attr_int(op.attrs, "window", 0)});
        continue;
      }
      if (op.opcode != "matmul" && op.opcode != "embed") continue;
      for (const ir::Operand& o : op.operands) {
        if (o.kind != ir::Operand::Kind::weight) continue;
        const ir::Weight* wt = m.find_weight(o.name);
        const gguf::TensorInfo* t = wt ? f.find_tensor(wt->gguf_name) : nullptr;
        if (!t) continue;
        if (op.opcode == "embed") {
          w.decode_bytes += double(t->nbytes) / double(std::max<uint64_t>(1, t->rows()));
        } else {
          w.decode_bytes += double(t->nbytes);
          if (i < last_attention) w.ops += 2.0 * double(t->elements());
        }
      }
    }
  }
  return w;
}

namespace {

constexpr int64_t kIters = 1 << 20;

// One probe: kIters rounds of C independent accumulator chains, one instruction of `macs`
// multiply-adds each; returns something that depends on every chain so none is dropped.
struct Probe {
  int32_t (*spin)();
  double macs_per_round;
};

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
template <int C>
int32_t spin_vnni512() {
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < C; ++c) {
      acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
      __asm__ volatile("" : "+v"(acc[c]));
    }
  __m512i s = acc[0];
  for (int c = 1; c < C; ++c) s = _mm512_add_epi32(s, acc[c]);
  // Summed through memory: GCC 12's _mm512_reduce_add_epi32 trips its own -Wuninitialized (PR 105593).
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  int32_t total = 0;
  for (int32_t x : lanes) total += x;
  return total;
}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define LOOM_DPBUSD256 _mm256_dpbusd_epi32
#elif defined(__AVXVNNI__)
#define LOOM_DPBUSD256 _mm256_dpbusd_avx_epi32
#endif

#if defined(LOOM_DPBUSD256)
template <int C>
int32_t spin_vnni256() {
  __m256i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < C; ++c) {
      acc[c] = LOOM_DPBUSD256(acc[c], a, b);
      __asm__ volatile("" : "+x"(acc[c]));
    }
  __m256i s = acc[0];
  for (int c = 1; c < C; ++c) s = _mm256_add_epi32(s, acc[c]);
  return _mm256_extract_epi32(s, 0);
}
#endif

#if defined(__AVX2__)
template <int C>
int32_t spin_avx2() {  // vpmaddubsw + vpmaddwd + vpaddd per 32 byte pairs
  __m256i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < C; ++c) {
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
      __asm__ volatile("" : "+x"(acc[c]));
    }
  __m256i s = acc[0];
  for (int c = 1; c < C; ++c) s = _mm256_add_epi32(s, acc[c]);
  return _mm256_extract_epi32(s, 0);
}
#endif

std::vector<Probe> probes() {
  std::vector<Probe> p;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  p.push_back({spin_vnni512<8>, 8 * 64});
  p.push_back({spin_vnni512<12>, 12 * 64});
  p.push_back({spin_vnni512<16>, 16 * 64});
  p.push_back({spin_vnni512<24>, 24 * 64});
#endif
#if defined(LOOM_DPBUSD256)
  p.push_back({spin_vnni256<12>, 12 * 32});
  p.push_back({spin_vnni256<16>, 16 * 32});
#endif
#if defined(__AVX2__)
  p.push_back({spin_avx2<12>, 12 * 32});
#endif
  return p;
}

// GOPS of one probe on `threads` threads, best of `reps`.
double run_probe(const Probe& pr, int threads, int reps) {
  double best = 0;
  std::vector<int32_t> sink(size_t(threads) * 16);
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { sink[size_t(t) * 16] = pr.spin(); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * pr.macs_per_round * double(kIters) * threads / s / 1e9);
  }
  volatile int32_t keep = 0;
  for (int32_t v : sink) keep = keep + v;
  return best;
}

}  // namespace

double measure_int8_peak_gops(int threads, int reps) {
  threads = std::max(1, threads);
  double best = 0;
  for (const Probe& p : probes()) best = std::max(best, run_probe(p, threads, reps));
  return best;
}

}  // namespace bench
