#include "bench/machine.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace bench {

double measure_read_bandwidth(size_t bytes, int threads, int reps) {
  size_t n = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // touch every page before timing
  threads = std::max(1, threads);
  std::vector<uint64_t> sums(size_t(threads) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i = lo;
#if defined(__AVX512F__)
        // Four independent 64-byte loads per step (the scalar loop below does not always
        // vectorize to full width; on this kind of machine it reads a few % slower).
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 32 <= hi; i += 32) {
          a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(buf.get() + i));
          a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(buf.get() + i + 8));
          a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(buf.get() + i + 16));
          a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(buf.get() + i + 24));
        }
        // Stored and summed rather than _mm512_reduce_add_epi64, which GCC 12 warns about
        // (-Wuninitialized on its own _mm256_undefined_si256).
        alignas(64) uint64_t lanes[8];
        _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
        for (uint64_t v : lanes) s0 += v;
#endif
        for (; i + 4 <= hi; i += 4) { s0 += buf[i]; s1 += buf[i + 1]; s2 += buf[i + 2]; s3 += buf[i + 3]; }
        for (; i < hi; ++i) s0 += buf[i];
        sums[size_t(t) * 8] = s0 + s1 + s2 + s3;  // one cache line per thread
      });
    }
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
  }
  volatile uint64_t sink = 0;
  for (auto s : sums) sink = sink + s;
  return best;
}

size_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

std::string cpu_features() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream ss(line.substr(line.find(':') + 1));
      std::string flag;
      for (const char* want : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                               "avx512_bf16", "avx_vnni"}) {
        ss.clear();
        ss.seekg(0);
        while (ss >> flag)
          if (flag == want) { out += out.empty() ? "" : " "; out += flag; break; }
      }
      break;
    }
  return out;
}

}  // namespace bench
