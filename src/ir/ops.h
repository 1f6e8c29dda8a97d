// The op set of `.loom` programs. Every op has one result; shapes below use T for the token
// dimension of the step. Weights are operands with '@'; a matmul weight [N x K] (rows x
// contiguous) computes y = x · Wᵀ, as every GGUF linear layer is stored.
//
//   embed      @table[V x E], %tok[T]:i32            -> [T x E] f32     row lookup, dequantized
//   rms_norm   %x[T x D], @w[G]    {eps, }           -> [T x D]         normalise each group of G
//                                                                        contiguous elements (G = D
//                                                                        for a whole row, G = head_dim
//                                                                        for per-head Q/K norm), then
//                                                                        multiply by w
//   matmul     %x[T x K], @w[N x K]                  -> [T x N]
//   add        %a[T x N], %b | @b[N]                 -> shape of a      elementwise; b is a value of a's
//                                                                        shape or of [1 x N], or a 1-D
//                                                                        weight; both broadcast over rows
//   mul        %a[T x N], %b | @b[N]                 -> shape of a      elementwise, operands as for add
//   scale      %x {factor}                           -> shape of x      x * factor
//   softcap    %x {cap}                              -> shape of x      cap * tanh(x / cap)
//   swiglu     %gate, %up                            -> shape of gate   silu(gate) * up
//   geglu      %gate, %up                            -> shape of gate   gelu_tanh(gate) * up
//   slice      %x[T x D] {start, size}               -> [T x size]      columns [start, start+size)
//   rope       %x[T x H*Dh], %pos[T]:i32 [, @freqs[n_rot/2]]
//              {head_dim, n_rot, base, mode = "normal"|"neox", freq_scale = 1}
//                                                    -> shape of x      rotary embedding of the first
//                                                                        n_rot dims of every head;
//                                                                        "normal" rotates pairs
//                                                                        (2i, 2i+1), "neox" (i, i+n_rot/2);
//                                                                        optional per-frequency divisors
//   attention  %q[T x Hq*Dh], %k[T x Hkv*Dh], %v[T x Hkv*Dv], %pos[T]:i32
//              {layer, n_head, n_kv_head, head_dim, value_dim, scale, window = 0, softcap = 0}
//                                                    -> [T x Hq*Dv]     writes k, v of this step into
//                                                                        KV-cache layer `layer` at the
//                                                                        given positions, then causal
//                                                                        grouped-query attention of q over
//                                                                        the cache (positions ≤ own; within
//                                                                        `window` when > 0)
//
// The function `@step` takes (%tok: tensor<Txi32>, %pos: tensor<Txi32>) and returns the
// logits tensor<TxVxf32>. KV-cache geometry comes from the attention ops' attributes.
#pragma once
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace ir {

// What an operand position accepts: an SSA value (%x), a weight (@w), or either.
enum class OperandKind { value, weight, either };

// The type an attribute must have. `number` accepts integers too (attr_float reads both).
enum class AttrKind { integer, number, string, boolean, int_list };
const char* attr_kind_name(AttrKind k);

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
};

struct OpInfo {
  std::string_view name;
  int min_operands;
  int max_operands;
  std::vector<std::string_view> required_attrs;
  std::vector<OperandKind> operand_kinds;  // one per position, max_operands entries
  std::vector<AttrSpec> attr_specs;        // every attribute the op accepts (others are errors)
};

// The registered ops; nullptr for an unknown opcode.
const OpInfo* find_op(std::string_view opcode);
// The spec of one attribute of an op; nullptr when the op does not accept it.
const AttrSpec* find_attr_spec(const OpInfo& op, std::string_view attr);
const std::vector<OpInfo>& all_ops();

}  // namespace ir
