// The lowering every backend needs from a verified program, as a pipeline of passes (one file
// each, each with its test under tests/passes/): the @step contract, operand resolution into
// value ids and weights, the point after which rows whose logits are not wanted are dropped,
// liveness, and grouping of matmuls that read one activation. Backends consume a Lowering over
// typed op views (an Opcode and typed attributes), never opcode strings, and add their own
// passes on top (the fast CPU backend's arena plan, weight layouts), so a new backend is not a
// new copy of these.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace loom::passes {

// The op set of ir/ops.h as an enum (op_view.cpp holds the one name table).
enum class Opcode { embed, rms_norm, matmul, add, mul, scale, softcap, swiglu, geglu, slice, rope, attention };
constexpr int kOpcodeCount = 12;
std::optional<Opcode> opcode_of(std::string_view name);
const char* opcode_name(Opcode c);

// Typed attributes (op_view.cpp), read once from a verified op; optional ones at their defaults.
struct RopeAttrs {
  int64_t head_dim = 0, n_rot = 0;
  double base = 0, freq_scale = 1;
  bool neox = false;
};
struct AttentionAttrs {
  int64_t layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, value_dim = 0, window = 0;
  double scale = 1, softcap = 0;
};
struct SliceAttrs {
  int64_t start = 0, size = 0;
};
RopeAttrs rope_attrs(const ir::Op& op);
AttentionAttrs attention_attrs(const ir::Op& op);
SliceAttrs slice_attrs(const ir::Op& op);
double norm_eps(const ir::Op& op);         // rms_norm
double scalar_attr(const ir::Op& op);      // scale: factor, softcap: cap

// An operand after resolution: a value id, or a declared weight.
struct OperandRef {
  int value = -1;
  const ir::Weight* weight = nullptr;
};

struct LoweredOp {
  Opcode code;
  const ir::Op* op = nullptr;
  std::vector<OperandRef> in;  // per operand, in order
  int out = -1;                // value id of the result
  int64_t cols = 0;            // result width (results are [T x cols])
  // The first weight operand's name ("" when none): what schedule globs select on.
  std::string weight_name() const;
};

struct Lowering {
  const ir::Func* step = nullptr;
  int tokens = 0, positions = 1;  // value ids of @step's (%tok, %pos)
  std::vector<int64_t> cols;      // per value id; 1 for the i32 parameters
  std::vector<LoweredOp> ops;
  int result = -1;                // value id of the logits
  // Index of the last attention op: every later op is row by row, so rows whose logits are not
  // wanted are dropped right after it (before op 0 when there is none: last_mixing = -1).
  int last_mixing = -1;
  bool has_mixing() const { return last_mixing >= 0; }
};

// Passes, by file. lower() runs the shared pipeline: step_contract, resolve_operands, row_drop.
const ir::Func& step_contract(const ir::Module& m);                     // step_contract.cpp
Lowering resolve_operands(const ir::Module& m, const ir::Func& step);    // resolve_operands.cpp
void row_drop(Lowering& l);                                              // row_drop.cpp
Lowering lower(const ir::Module& m);                                     // pipeline.cpp

// liveness.cpp: per value id, the largest position of an op reading it (-1: never read), where
// op i runs at position_of_op[i] (empty: at i; a backend that merges ops into one step maps
// them to that step).
std::vector<int> last_use(const Lowering& l, const std::vector<int>& position_of_op = {});

// matmul_groups.cpp: matmuls reading the same activation run as one step. For each op, the op
// that leads its step (itself unless it joined an earlier matmul). A matmul joins the nearest
// earlier step (within `lookback` steps, never across the row drop) led by a matmul of the same
// input for which `compatible` holds, while that step has fewer than `max_parts` matmuls.
// lookback 0 groups nothing.
struct GroupRules {
  int lookback = 6;
  int max_parts = 8;
  std::function<bool(const LoweredOp& leader, const LoweredOp& op)> compatible;
};
std::vector<int> group_matmuls(const Lowering& l, const GroupRules& rules);

}  // namespace loom::passes
