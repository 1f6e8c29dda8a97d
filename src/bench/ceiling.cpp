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
// AVX2 has no int8 dot-accumulate: a kernel multiplies unsigned by signed bytes into s16 pairs
// (vpmaddubsw), widens by another multiply (vpmaddwd by ones) and adds into s32. Written as
// asm, because as intrinsics the two multiplies take no accumulator and a compiler hoists them
// out of the loop (the loop then timed vpaddd through the stack: a "peak" below real kernels).
// Four chains per block; with `pair`, two vpmaddubsw are summed in s16 before the widening
// (as the k-quant tiles do where the codes' range allows): 64 multiply-adds per chain, not 32.
constexpr int kAvx2Rounds = 8;  // a block is 4 chains: rounds of it so a run lasts ~10 ms
template <bool pair>
int32_t spin_avx2() {
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), b2 = _mm256_set1_epi8(5),
                one = _mm256_set1_epi16(1);
  __m256i t0, t1, t2, t3, u0, u1, u2, u3;
  for (int64_t i = 0; i < kAvx2Rounds * kIters; ++i) {
    if constexpr (pair) {
      __asm__ volatile(
          "vpmaddubsw %[b], %[a], %[t0]\n\tvpmaddubsw %[b2], %[a], %[u0]\n\t"
          "vpmaddubsw %[b], %[a], %[t1]\n\tvpmaddubsw %[b2], %[a], %[u1]\n\t"
          "vpmaddubsw %[b], %[a], %[t2]\n\tvpmaddubsw %[b2], %[a], %[u2]\n\t"
          "vpmaddubsw %[b], %[a], %[t3]\n\tvpmaddubsw %[b2], %[a], %[u3]\n\t"
          "vpaddw %[u0], %[t0], %[t0]\n\tvpaddw %[u1], %[t1], %[t1]\n\t"
          "vpaddw %[u2], %[t2], %[t2]\n\tvpaddw %[u3], %[t3], %[t3]\n\t"
          "vpmaddwd %[one], %[t0], %[t0]\n\tvpmaddwd %[one], %[t1], %[t1]\n\t"
          "vpmaddwd %[one], %[t2], %[t2]\n\tvpmaddwd %[one], %[t3], %[t3]\n\t"
          "vpaddd %[t0], %[c0], %[c0]\n\tvpaddd %[t1], %[c1], %[c1]\n\t"
          "vpaddd %[t2], %[c2], %[c2]\n\tvpaddd %[t3], %[c3], %[c3]"
          : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [t0] "=&x"(t0), [t1] "=&x"(t1),
            [t2] "=&x"(t2), [t3] "=&x"(t3), [u0] "=&x"(u0), [u1] "=&x"(u1), [u2] "=&x"(u2), [u3] "=&x"(u3)
          : [a] "x"(a), [b] "x"(b), [b2] "x"(b2), [one] "x"(one));
    } else {
      __asm__ volatile(
          "vpmaddubsw %[b], %[a], %[t0]\n\tvpmaddubsw %[b], %[a], %[t1]\n\t"
          "vpmaddubsw %[b], %[a], %[t2]\n\tvpmaddubsw %[b], %[a], %[t3]\n\t"
          "vpmaddwd %[one], %[t0], %[t0]\n\tvpmaddwd %[one], %[t1], %[t1]\n\t"
          "vpmaddwd %[one], %[t2], %[t2]\n\tvpmaddwd %[one], %[t3], %[t3]\n\t"
          "vpaddd %[t0], %[c0], %[c0]\n\tvpaddd %[t1], %[c1], %[c1]\n\t"
          "vpaddd %[t2], %[c2], %[c2]\n\tvpaddd %[t3], %[c3], %[c3]"
          : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [t0] "=&x"(t0), [t1] "=&x"(t1),
            [t2] "=&x"(t2), [t3] "=&x"(t3)
          : [a] "x"(a), [b] "x"(b), [one] "x"(one));
    }
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
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
  p.push_back({spin_avx2<false>, kAvx2Rounds * 4 * 32});
  p.push_back({spin_avx2<true>, kAvx2Rounds * 4 * 64});
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
