// The schedule keys of the fast CPU backend, read into typed options. Every choice the backend
// makes that a program may change is one of these keys; nothing else (no environment
// variable) changes what a plan runs.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "quant/simd/kernels.h"

namespace loom::backend::cpu::fast {

const std::vector<ScheduleKey>& fast_schedule_keys();

struct FastOptions {
  int threads = 0;                   // 0: hardware concurrency
  loom::quant::simd::Isa isa{};      // the effective level: the `isa` cap against the CPU's best
  std::string isa_cap = "auto";
  bool huge_pages = true;            // MADV_HUGEPAGE on packed weight buffers
  int group_lookback = 6;            // steps back a matmul may join a group reading its input
  int group_parts = 8;               // most matmuls in one group
  int64_t stream_rows = 64;          // steps of at most this many rows: weight-streaming matmul tiles
  std::string dump_dir;              // diagnosis: every non-matmul step's result as <dir>/<value>.f32
  bool profile = false;              // diagnosis: time per step kind on stderr
};

// Throws (file:line:col) on a key the backend does not declare or a value out of range.
// CompileOptions::threads > 0 overrides the schedule's `threads` (the command line's -t).
FastOptions read_fast_options(const ir::Module& m, const CompileOptions& opts);

}  // namespace loom::backend::cpu::fast
