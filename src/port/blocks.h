// Transformer pieces that several architectures share, each one the way llama.cpp's graphs
// build it (llm_graph_context::build_norm / build_ffn / build_attn), so an architecture file
// is a short list of the pieces its model card names.
#pragma once
#include <optional>
#include <string>

#include "port/program.h"

namespace port {

// One decoder layer's names: GGUF tensors `blk.<L>.<name>.weight`, SSA values `%b<L>.<name>`.
class Layer {
 public:
  Layer(Program& p, int64_t index) : p(p), index(index) {}
  std::string operator()(const std::string& value) const { return "b" + std::to_string(index) + "." + value; }
  std::string tensor(const std::string& name, const std::string& suffix = "weight") const {
    return "blk." + std::to_string(index) + "." + name + "." + suffix;
  }
  Operand w(const std::string& name) { return p.weight(tensor(name)); }
  std::optional<Operand> maybe(const std::string& name, const std::string& suffix = "weight") {
    return p.maybe_weight(tensor(name, suffix));
  }
  Program& p;
  const int64_t index;
};

// x·Wᵀ, plus the bias when the file has one: `name` is the result.
Operand linear(Program& p, const std::string& name, const Operand& x, const Operand& w,
               const std::optional<Operand>& bias);

struct AttentionWeights {
  Operand wq, wk, wv, wo;
  std::optional<Operand> bq, bk, bv, bo;  // attn_{q,k,v,output}.bias when present
  std::optional<Operand> q_norm, k_norm;  // attn_{q,k}_norm: per-head RMS norm (qwen3, gemma3)
};
// Separate attn_q / attn_k / attn_v / attn_output, with whichever biases and q/k norms exist.
AttentionWeights attention_weights(Layer& b);

struct QKV {
  Operand q, k, v;
};
QKV project_qkv(Layer& b, const Operand& h, const AttentionWeights& w);

// Per-head q/k norm (when the weights have one), rotary embedding of q and k, cached causal
// attention, and the output projection (+ bias). Returns the block's output before the residual.
Operand attend(Layer& b, const QKV& x, const AttentionWeights& w, const RopeSpec& rope, const AttentionSpec& attn);

// A feed-forward block with a parallel gate: down(glu(gate(h), up(h))), biases where present.
// `glu` is the opcode: "swiglu" (SiLU gate) or "geglu" (tanh-GELU gate).
Operand gated_ffn(Layer& b, const Operand& h, const std::string& glu);

// The final norm and the vocabulary projection: output.weight, or token_embd.weight when the
// file ties them (no output.weight).
Operand lm_head(Program& p, const Operand& x);

// The rotary and attention settings that follow from the hyper-parameters alone.
RopeSpec rope_spec(const HParams& hp, const std::string& mode);
AttentionSpec attention_spec(const HParams& hp, int64_t layer);  // scale = 1/sqrt(head_dim)
float inv_sqrt(int64_t n);  // 1.0f / sqrtf(n), as llama.cpp computes it in fp32

// Mixture-of-experts layers (blk.N.ffn_gate_inp) need routing ops Loom does not have yet.
void refuse_moe(Program& p);

}  // namespace port
