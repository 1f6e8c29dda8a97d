// Phi-3 / Phi-3.5 / Phi-4 (dense): as llama.cpp's src/models/phi3.cpp builds it.
//   x = token_embd[tok]
//   each layer:  qkv = attn_qkv( rms_norm(x, attn_norm) )  -> q | k | v column slices
//                x += attn_output( attention( rope(q), rope(k), v ) )
//                gu = ffn_up( rms_norm(x, ffn_norm) )       -> gate | up halves
//                x += ffn_down( silu(gate) * up )
//   logits = output( rms_norm(x, output_norm) ) (+ output.bias)
// Rotary embedding in "neox" mode; queries scaled by 1/sqrt(head_dim) after the rope, as their
// own op (attention's scale then 1, the order llama.cpp rounds in). Files with separate
// attn_q/attn_k/attn_v (and biases) are accepted too. llama.cpp ignores attention.sliding_window
// for phi3 ("Phi SWA is currently disabled", llama.cpp#13676), so every layer is full causal
// here as well, to give the same logits.
#include "common/error.h"
#include "port/blocks.h"

namespace port {

ir::Module port_phi3(const gguf::File& f) {
  const HParams hp = read_hparams(f);
  Program p(f, hp);
  refuse_moe(p);
  if (p.has_tensor("rope_factors_long.weight") || p.has_tensor("rope_factors_short.weight"))
    loom::fail("{}: LongRoPE (rope_factors_long/short) needs the rope attention factor, which the rope op does "
               "not have yet", f.path());
  Operand x = p.embed("x0", p.weight("token_embd.weight"));
  const RopeSpec rope = rope_spec(hp, "neox");
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_kv_head * hp.head_dim;

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Layer b(p, l);
    const Operand h = p.rms_norm(b("attn_in"), x, b.w("attn_norm"), hp.eps);
    AttentionWeights w;
    QKV qkv;
    if (b.maybe("attn_qkv")) {
      const Operand fused = p.matmul(b("qkv"), h, b.w("attn_qkv"));
      w.wo = b.w("attn_output");
      w.bo = b.maybe("attn_output", "bias");
      qkv = {p.slice(b("q"), fused, 0, q_dim), p.slice(b("k"), fused, q_dim, kv_dim),
             p.slice(b("v"), fused, q_dim + kv_dim, kv_dim)};
    } else {
      w = attention_weights(b);
      qkv = project_qkv(b, h, w);
    }
    AttentionSpec attn = attention_spec(hp, l);
    attn.q_prescale = inv_sqrt(hp.head_dim);  // llama.cpp: Qcur = ggml_scale(Qcur, 1/sqrt(head_dim)), kq_scale 1
    const Operand r = p.add(b("res"), x, attend(b, qkv, w, rope, attn));

    const Operand g = p.rms_norm(b("ffn_in"), r, b.w("ffn_norm"), hp.eps);
    const Operand gate_up = p.matmul(b("gate_up"), g, b.w("ffn_up"));  // [gate | up], 2 * n_ff wide
    const Operand act = p.glu(b("act"), "swiglu", p.slice(b("gate"), gate_up, 0, hp.n_ff),
                              p.slice(b("up"), gate_up, hp.n_ff, hp.n_ff));
    x = p.add(b("out"), r, p.matmul(b("ffn_out"), act, b.w("ffn_down")));
  }
  return p.finish(lm_head(p, x));
}

}  // namespace port
