// The persistent decode step (schedule key decode_persistent; docs/cuda-kernels.md, version 13):
// a one-row step's fused kernels after the embedding — per llama layer the q/k/v launch with its
// rope and KV store, attention, the merge of its chunks, o + residual, gate/up + swiglu, down +
// residual, then the output head — as phases of one kernel whose blocks stay resident (as many as
// the device holds at once) and hand over at a grid barrier (a counter in global memory) instead
// of a kernel boundary. A matmul phase's warps issue their first weight loads before the barrier;
// after it, every block stages the phase's input row in shared memory as q8_1 itself (through the
// RMS norm before it, where the decode fusion had a norm_q8 kernel), so neither the norms nor the
// quantizations are phases. Each phase computes what the launched kernels compute, in their
// order, so a step gives the same bits either way (the e2e mode "decode, decode_persistent =
// true" checks it, and persistent_test.cpp phase by phase; both passed in runs 15 and 16 on
// H100s). Off by default: run 16 measured the 135M's tg128 at 653 t/s with it, 1,191 without.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"

namespace loom::backend::cuda {

// A matmul phase: the parts and epilogue matmul_q8_parts would take at one activation row (the
// gated epilogue without its q8_1 output: the next phase stages it), and the f32 row they read.
struct PersistentMatmul {
  std::vector<MatmulPart> parts;
  MatmulEpilogue e = MatmulEpilogue::store;
  int64_t K = 0;
  const float* x = nullptr;     // the input row (f32), staged by each block as q8_1
  const float* norm = nullptr;  // RMS-normalised by these weights first (null: none)
  float eps = 0;
  const RopeKvOut* rope = nullptr;
};

// An attention phase of one row (the decode kernel's blocks as work items), then, with chunks > 1,
// a phase merging the chunks as the combine kernel does.
struct PersistentAttention {
  AttentionShape a;
  KvView kv;
  StepTables st;
  const float* q = nullptr;
  float* out = nullptr;
  int chunks = 1;
  float* scratch = nullptr;  // chunks > 1: the partial results (attention_scratch_floats)
};

// How upload sets a launch up. The probes time the parts of a matmul phase's cost (the kernel
// bench): `barrier` has each matmul phase wait at the grid barrier and do nothing else, `stage`
// adds the staging of its input row; the outputs are not written.
enum class PersistentProbe { full, barrier, stage };
struct PersistentLaunch {
  int blocks_per_sm = 0;  // blocks a multiprocessor, at most as many as fit (0: as many as fit)
  PersistentProbe probe = PersistentProbe::full;
  bool trace = false;     // probe stage: the staging blocks' clocks at each step (stage_trace)
};
// A traced stage probe's mean microseconds a staging block spent, per phase, from its arrival to
// leaving the barrier, loading the row, its sum of squares, and quantizing (SM clocks at the
// device's rated clock), over the launches since upload.
struct StageTrace {
  double barrier_us = 0, load_us = 0, sum_us = 0, quantize_us = 0;
  long long phases = 0;  // staging blocks' phases counted
};

class PersistentStep {
 public:
  PersistentStep();
  ~PersistentStep();
  PersistentStep(PersistentStep&&) noexcept;
  PersistentStep& operator=(PersistentStep&&) noexcept;
  // Why a phase has no persistent form ("" if it has one).
  static std::string unsupported(const PersistentMatmul& m);
  static std::string unsupported(const PersistentAttention& a);
  // Phases in step order (each must be supported). The attention phases of one step share a
  // head_dim and a group size (the kernel is instantiated per pair).
  void add(const PersistentMatmul& m);
  void add(const PersistentAttention& a);
  // Copies the phases to the device (a launch, captured or not, reads them there).
  void upload(const PersistentLaunch& how = {});
  // The grid barrier's reset and the one kernel, on the stream.
  void launch(cudaStream_t s) const;
  StageTrace stage_trace() const;  // after a traced launch has finished

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::backend::cuda
