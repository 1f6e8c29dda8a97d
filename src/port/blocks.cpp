#include "port/blocks.h"

#include <cmath>

#include "common/error.h"

namespace port {

Operand linear(Program& p, const std::string& name, const Operand& x, const Operand& w,
               const std::optional<Operand>& bias) {
  if (!bias) return p.matmul(name, x, w);
  return p.add(name, p.matmul(name + "_mm", x, w), *bias);
}

AttentionWeights attention_weights(Layer& b) {
  AttentionWeights w;
  w.wq = b.w("attn_q");
  w.wk = b.w("attn_k");
  w.wv = b.w("attn_v");
  w.wo = b.w("attn_output");
  w.bq = b.maybe("attn_q", "bias");
  w.bk = b.maybe("attn_k", "bias");
  w.bv = b.maybe("attn_v", "bias");
  w.bo = b.maybe("attn_output", "bias");
  w.q_norm = b.maybe("attn_q_norm");
  w.k_norm = b.maybe("attn_k_norm");
  return w;
}

QKV project_qkv(Layer& b, const Operand& h, const AttentionWeights& w) {
  Program& p = b.p;
  return {linear(p, b("q"), h, w.wq, w.bq), linear(p, b("k"), h, w.wk, w.bk), linear(p, b("v"), h, w.wv, w.bv)};
}

Operand attend(Layer& b, const QKV& x, const AttentionWeights& w, const RopeSpec& rope, const AttentionSpec& attn) {
  Program& p = b.p;
  Operand q = x.q, k = x.k;
  if (w.q_norm) q = p.rms_norm(b("q_norm"), q, *w.q_norm, p.hp().eps);
  if (w.k_norm) k = p.rms_norm(b("k_norm"), k, *w.k_norm, p.hp().eps);
  q = p.rope(b("q_rope"), q, rope);
  k = p.rope(b("k_rope"), k, rope);
  AttentionSpec spec = attn;
  if (attn.q_prescale > 0) {
    q = p.scale(b("q_scaled"), q, attn.q_prescale);
    spec.scale = 1.0;
  }
  const Operand a = p.attention(b("attn"), q, k, x.v, spec);
  return linear(p, b("attn_out"), a, w.wo, w.bo);
}

Operand gated_ffn(Layer& b, const Operand& h, const std::string& glu) {
  Program& p = b.p;
  const Operand up = linear(p, b("up"), h, b.w("ffn_up"), b.maybe("ffn_up", "bias"));
  const Operand gate = linear(p, b("gate"), h, b.w("ffn_gate"), b.maybe("ffn_gate", "bias"));
  const Operand act = p.glu(b("act"), glu, gate, up);
  return linear(p, b("ffn_out"), act, b.w("ffn_down"), b.maybe("ffn_down", "bias"));
}

Operand lm_head(Program& p, const Operand& x) {
  Operand h = p.rms_norm("out_norm", x, p.weight("output_norm.weight"), p.hp().eps);
  if (auto bias = p.maybe_weight("output_norm.bias")) h = p.add("out_norm_b", h, *bias);
  const Operand w = p.has_tensor("output.weight") ? p.weight("output.weight") : p.weight("token_embd.weight");
  return linear(p, "logits", h, w, p.maybe_weight("output.bias"));
}

RopeSpec rope_spec(const HParams& hp, const std::string& mode) {
  RopeSpec r;
  r.mode = mode;
  r.head_dim = hp.head_dim;
  r.n_rot = hp.n_rot;
  r.base = hp.rope_base;
  r.freq_scale = hp.rope_freq_scale;
  return r;
}

float inv_sqrt(int64_t n) { return 1.0f / std::sqrt(float(n)); }

AttentionSpec attention_spec(const HParams& hp, int64_t layer) {
  AttentionSpec a;
  a.layer = layer;
  a.n_head = hp.n_head;
  a.n_kv_head = hp.n_kv_head;
  a.head_dim = hp.head_dim;
  a.value_dim = hp.value_dim;
  a.scale = inv_sqrt(hp.head_dim);
  return a;
}

void refuse_moe(Program& p) {
  for (int64_t l = 0; l < p.hp().n_layer; ++l) {
    const std::string t = "blk." + std::to_string(l) + ".ffn_gate_inp.weight";
    if (p.has_tensor(t))
      loom::fail("{}: mixture-of-experts layers ({}) are not supported by Loom's porter yet", p.file().path(), t);
  }
}

}  // namespace port
