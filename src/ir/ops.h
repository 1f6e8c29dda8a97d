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
//   add        %a, %b | @b[N]                        -> shape of a      elementwise; a 1-D weight
//                                                                        broadcasts over rows (bias)
//   mul        %a, %b                                -> shape of a      elementwise
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

struct OpInfo {
  std::string_view name;
  int min_operands;
  int max_operands;
  std::vector<std::string_view> required_attrs;
};

// The registered ops; nullptr for an unknown opcode.
const OpInfo* find_op(std::string_view opcode);
const std::vector<OpInfo>& all_ops();

}  // namespace ir
