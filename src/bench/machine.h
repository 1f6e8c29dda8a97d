// Facts about the machine a measurement ran on, for ceilings and for BENCHMARKS.md rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace bench {

// Read bandwidth in GB/s: a vectorizable sum over `bytes` of memory, `threads` threads,
// best of `reps` passes (the first touch is excluded).
double measure_read_bandwidth(size_t bytes = size_t(1) << 30, int threads = 2, int reps = 5);

size_t peak_rss_bytes();   // high-water resident set of this process
std::string cpu_model();   // from /proc/cpuinfo, "unknown" elsewhere
std::string cpu_features();  // "avx2 avx512f avx512_vnni ..." of those Loom uses

}  // namespace bench
