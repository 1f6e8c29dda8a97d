// Qwen3 (dense): the llama layer without biases, with a per-head RMS norm on q and k before
// the rotary embedding ("neox" mode), and head_dim from attention.key_length (128 on every
// size, not n_embd / n_head). As llama.cpp's src/models/qwen3.cpp; output tied when absent.
#include "port/blocks.h"

namespace port {

ir::Module port_qwen3(const gguf::File& f) {
  const HParams hp = read_hparams(f);
  Program p(f, hp);
  refuse_moe(p);
  Operand x = p.embed("x0", p.weight("token_embd.weight"));
  const RopeSpec rope = rope_spec(hp, "neox");

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Layer b(p, l);
    const Operand h = p.rms_norm(b("attn_in"), x, b.w("attn_norm"), hp.eps);
    AttentionWeights w = attention_weights(b);
    w.q_norm = b.w("attn_q_norm");  // [head_dim]: rms_norm normalises each head
    w.k_norm = b.w("attn_k_norm");
    const Operand r = p.add(b("res"), x, attend(b, project_qkv(b, h, w), w, rope, attention_spec(hp, l)));

    const Operand g = p.rms_norm(b("ffn_in"), r, b.w("ffn_norm"), hp.eps);
    x = p.add(b("out"), r, gated_ffn(b, g, "swiglu"));
  }
  return p.finish(lm_head(p, x));
}

}  // namespace port
