#include "backend/cpu/fast/fast_options.h"

#include <algorithm>

namespace loom::backend::cpu::fast {

using Type = ScheduleKey::Type;

const std::vector<ScheduleKey>& fast_schedule_keys() {
  static const std::vector<ScheduleKey> keys = {
      {"", "threads", Type::integer, 0, 1024, {}, int64_t(0), "worker threads (0: the hardware's concurrency)"},
      {"", "isa", Type::choice, 0, 0, {"auto", "avx512", "avx2", "scalar"}, std::string("auto"),
       "cap on the SIMD kernel level (auto: the best this CPU runs); the x8 weight layout needs avx2 or avx512"},
      {"", "huge_pages", Type::boolean, 0, 0, {}, true,
       "advise huge pages for the packed weight buffers (fewer TLB misses in the decode weight stream)"},
      {"", "matmul_group_lookback", Type::integer, 0, 64, {}, int64_t(6),
       "steps back a matmul may join a group of matmuls reading the same activation (0: no grouping)"},
      {"", "matmul_group_parts", Type::integer, 1, 64, {}, int64_t(8), "most matmuls in one group"},
      {"", "matmul_stream_rows", Type::integer, 1, 1 << 16, {}, int64_t(64),
       "steps of at most this many rows (decode, batched decode) cut each matmul into equal weight-byte tiles "
       "holding every row; longer steps use 128-row x 256-activation prefill tiles (same bits either way)"},
      {"", "dump_dir", Type::text, 0, 0, {}, std::string(),
       "diagnosis: write every non-matmul result as <dir>/<value>.f32 each step (empty: off)"},
      {"", "profile", Type::boolean, 0, 0, {}, false, "diagnosis: print time per step kind to stderr"},
      {"matmul", "layout", Type::choice, 0, 0, {"packed", "rows"}, std::string("packed"),
       "weight layout: x8 row-interleaved groups where the type and ISA have them (packed), or the stored rows"},
      {"matmul", "prefill_repack", Type::boolean, 0, 0, {}, true,
       "prefill reads Q5_0 weights kept in stored rows as Q8_0 rows (same results, faster GEMM, 34/22 the bytes)"},
      {"attention", "chunk", Type::integer, 0, 1 << 20, {}, int64_t(0),
       "attention: KV positions per split-K task, cut at multiples of it so results do not depend on the batch "
       "(0: 256)"},
      {"attention", "rows", Type::integer, 0, 256, {}, int64_t(0),
       "attention: query rows of one sequence whose heads share each key tile and value read (more: fewer key "
       "conversions per score, larger score buffers); a row's result does not depend on it (0: 16)"},
  };
  return keys;
}

FastOptions read_fast_options(const ir::Module& m, const CompileOptions& opts) {
  check_schedule(m, fast_schedule_keys(), "cpu");
  const ScheduleReader r(m, fast_schedule_keys());
  FastOptions o;
  o.threads = opts.threads > 0 ? opts.threads : int(r.integer("threads"));
  o.isa_cap = r.text("isa");
  using loom::quant::simd::Isa;
  const Isa cap = o.isa_cap == "scalar" ? Isa::scalar : o.isa_cap == "avx2" ? Isa::avx2 : Isa::avx512;
  o.isa = std::min(cap, loom::quant::simd::best_isa());
  o.huge_pages = r.boolean("huge_pages");
  o.group_lookback = int(r.integer("matmul_group_lookback"));
  o.group_parts = int(r.integer("matmul_group_parts"));
  o.stream_rows = r.integer("matmul_stream_rows");
  o.dump_dir = r.text("dump_dir");
  o.profile = r.boolean("profile");
  return o;
}

}  // namespace loom::backend::cpu::fast
