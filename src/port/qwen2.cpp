// Qwen2 / Qwen2.5: the llama layer with biases on q, k and v, and rotary embedding in "neox"
// mode (i, i + n_rot/2). As llama.cpp's src/models/qwen2.cpp; output tied when absent.
#include "port/blocks.h"

namespace port {

ir::Module port_qwen2(const gguf::File& f) {
  const HParams hp = read_hparams(f);
  Program p(f, hp);
  refuse_moe(p);
  Operand x = p.embed("x0", p.weight("token_embd.weight"));
  const RopeSpec rope = rope_spec(hp, "neox");

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Layer b(p, l);
    const Operand h = p.rms_norm(b("attn_in"), x, b.w("attn_norm"), hp.eps);
    AttentionWeights w = attention_weights(b);
    w.bq = p.weight(b.tensor("attn_q", "bias"));  // required: llama.cpp refuses qwen2 files without them
    w.bk = p.weight(b.tensor("attn_k", "bias"));
    w.bv = p.weight(b.tensor("attn_v", "bias"));
    const Operand r = p.add(b("res"), x, attend(b, project_qkv(b, h, w), w, rope, attention_spec(hp, l)));

    const Operand g = p.rms_norm(b("ffn_in"), r, b.w("ffn_norm"), hp.eps);
    x = p.add(b("out"), r, gated_ffn(b, g, "swiglu"));
  }
  return p.finish(lm_head(p, x));
}

}  // namespace port
