// Decode fusion, a pass of the CUDA backend over the shared lowering: which ops run together
// as one kernel. A decode step of a small model is bound by the number of kernels, not bytes
// (docs/cuda-kernels.md): a llama layer is ~20 launches op by op. Fused, it is 8:
//   rms_norm + q8_1 quantize of its output           (norm_q8)
//   q, k, v matmuls in one launch                    (a matmul step of up to 4 weights)
//   rope of q and k + the KV store                   (a rope_attention step, then attention)
//   attention writing its output in q8_1 too         (attention_q8)
//   output projection + residual add                 (a matmul step with an add epilogue)
//   gate and up matmuls + swiglu/geglu, writing q8_1  (a matmul step with a gated epilogue)
//   down projection + residual add.
// At one activation row (a decode step of one sequence) one more join, made at run time where
// this pass marks it: the q/k/v launch rotates q and k and stores k and v into the KV cache in
// its epilogue (rope_attention below; the rope_attention step then runs attention alone). A
// llama layer is then 7 launches.
// Ops move only to where every input is already defined (a joined matmul to its group's
// leader, an epilogue op to its matmuls, the two ropes to their attention); liveness is taken
// by step (passes::last_use's positions), so buffers stay valid whether a step runs fused or,
// for prefill steps on the GEMM path, op by op in program order.
#pragma once
#include <functional>
#include <vector>

#include "passes/lowering.h"

namespace loom::backend::cuda {

struct FusedStep {
  enum class Kind { op, matmuls, rope_attention };
  Kind kind = Kind::op;
  std::vector<int> ops;  // op indices in program order: what runs when the step is not fused
  // matmuls: the op folded into their launch (a gated op reading two of them, or an add of
  // one of them and a residual), -1 when none; it is the last entry of ops.
  int epilogue_op = -1;
  // matmuls, at one activation row: the attention whose ropes and KV store the launch's
  // epilogue does (the q, k and v matmuls are parts, llama's rotary pairs (2i, 2i + 1); -1: none).
  int rope_attention = -1;
};

struct DecodeFusion {
  std::vector<FusedStep> steps;      // in the order they run
  std::vector<int> step_of_op;       // per op: the index of its step
  std::vector<char> norm_q8;         // per op: an rms_norm that also writes q8_1 for packed matmuls
  std::vector<char> attention_q8;    // per op: an attention that also writes q8_1 for packed matmuls
  std::vector<char> gated_q8;        // per op: a gated epilogue that also writes q8_1 for packed matmuls
  std::vector<int> def_op;           // per value id: the op that defines it (-1: a parameter)
};

struct FusionRules {
  bool enabled = true;  // false: one step per op, nothing flagged (the unfused plan)
  bool fold_ropes = true;  // the join of one activation row (rope_attention)
  std::function<bool(const passes::LoweredOp&)> packed;          // a matmul on the integer-dot kernels
  std::function<bool(const passes::LoweredOp&)> whole_row_norm;  // an rms_norm normalising whole rows
};

DecodeFusion fuse_decode(const passes::Lowering& l, const FusionRules& rules);

}  // namespace loom::backend::cuda
