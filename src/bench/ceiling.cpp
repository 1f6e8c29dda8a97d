#include "bench/ceiling.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace bench {

Work work_per_token(const ir::Module& m, const gguf::File& f) {
  Work w;
  for (const ir::Func& fn : m.funcs) {
    size_t last_attention = fn.body.size();  // none: every row goes through every matmul
    for (size_t i = 0; i < fn.body.size(); ++i)
      if (fn.body[i].opcode == "attention") last_attention = i;
    for (size_t i = 0; i < fn.body.size(); ++i) {
      const ir::Op& op = fn.body[i];
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

// Multiply-adds done by one call: kIters x kChains instructions of 64 (VNNI) or 32 (AVX2) each.
constexpr int64_t kIters = 1 << 22, kChains = 12;

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
constexpr double kMacsPerInstr = 64;
int32_t spin() {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < kChains; ++c) {
      acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
      __asm__ volatile("" : "+v"(acc[c]));
    }
  __m512i s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  return out[0];
}
#elif defined(__AVX2__)
constexpr double kMacsPerInstr = 32;  // vpmaddubsw + vpmaddwd + vpaddd per 32 byte pairs
int32_t spin() {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < kChains; ++c) {
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
      __asm__ volatile("" : "+x"(acc[c]));
    }
  int32_t out[8];
  __m256i s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_epi32(s, acc[c]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0];
}
#else
constexpr double kMacsPerInstr = 0;
int32_t spin() { return 0; }
#endif

}  // namespace

double measure_int8_peak_gops(int threads, int reps) {
  if (kMacsPerInstr == 0) return 0;
  threads = std::max(1, threads);
  double best = 0;
  std::vector<int32_t> sink(size_t(threads) * 16);
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { sink[size_t(t) * 16] = spin(); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kMacsPerInstr * double(kIters * kChains) * threads / s / 1e9);
  }
  volatile int32_t keep = 0;
  for (int32_t v : sink) keep = keep + v;
  return best;
}

}  // namespace bench
