// Llama — and the many files that say "llama": Llama 2/3, Mistral-style dense models, SmolLM2.
// As llama.cpp's src/models/llama.cpp builds it:
//   x = token_embd[tok]
//   each layer:  x += attn_output( attention( rope(q), rope(k), v ) )   of rms_norm(x, attn_norm)
//                x += ffn_down( silu(ffn_gate h) * ffn_up h )          of h = rms_norm(x, ffn_norm)
//   logits = output( rms_norm(x, output_norm) ), output tied to token_embd when absent.
// Rotary embedding in "normal" mode (pairs 2i, 2i+1); llama3's rope_freqs divide the
// frequencies; q/k/v/o and FFN biases are used when present; attention.scale overrides
// 1/sqrt(head_dim).
#include "port/blocks.h"

namespace port {

ir::Module port_llama(const gguf::File& f) {
  const HParams hp = read_hparams(f);
  Program p(f, hp);
  refuse_moe(p);
  Operand x = p.embed("x0", p.weight("token_embd.weight"));

  RopeSpec rope = rope_spec(hp, "normal");
  rope.freqs = p.maybe_weight("rope_freqs.weight");
  const double scale = arch_float(f, "attention.scale").value_or(0.0);

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Layer b(p, l);
    const Operand h = p.rms_norm(b("attn_in"), x, b.w("attn_norm"), hp.eps);
    const AttentionWeights w = attention_weights(b);
    AttentionSpec attn = attention_spec(hp, l);
    if (scale != 0.0) attn.scale = scale;
    const Operand r = p.add(b("res"), x, attend(b, project_qkv(b, h, w), w, rope, attn));

    const Operand g = p.rms_norm(b("ffn_in"), r, b.w("ffn_norm"), hp.eps);
    x = p.add(b("out"), r, gated_ffn(b, g, "swiglu"));
  }
  return p.finish(lm_head(p, x));
}

}  // namespace port
