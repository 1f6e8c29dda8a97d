// Gemma 3 (text): as llama.cpp's src/models/gemma3.cpp (gemma3-iswa) builds it.
//   x = token_embd[tok] * sqrt(n_embd)
//   each layer:  x += post_attention_norm( attn_output( attention(...) ) )  of rms_norm(x, attn_norm)
//                x += post_ffw_norm( ffn_down( gelu(ffn_gate h) * ffn_up h ) ) of rms_norm(x, ffn_norm)
//   logits = token_embd( rms_norm(x, output_norm) ), soft-capped when final_logit_softcapping is set.
// q and k get a per-head RMS norm before the "neox" rotary embedding. With a sliding window,
// five of every six layers are local (layers 5, 11, 17, ... are global): local layers attend
// within attention.sliding_window and rotate with base 10000, unscaled; global layers use
// rope.freq_base and the file's rope scaling. Queries are scaled by 1/sqrt(head_dim)
// (query_pre_attn_scalar), except on the 27B (62 layers), which uses 1/sqrt(n_embd / n_head),
// by a scale op after the rotary embedding (the attention's own scale is 1), as llama.cpp does.
#include <cmath>

#include "port/blocks.h"

namespace port {

ir::Module port_gemma3(const gguf::File& f) {
  const HParams hp = read_hparams(f);
  Program p(f, hp);
  refuse_moe(p);
  constexpr int64_t kPattern = 6;  // llama.cpp: hparams.set_swa_pattern(6)
  const int64_t window = hp.sliding_window;
  const double softcap = arch_float(f, "final_logit_softcapping").value_or(0.0);
  const double q_scale = hp.n_layer == 62 ? inv_sqrt(hp.n_embd / hp.n_head) : inv_sqrt(hp.head_dim);
  p.attrs().push_back({"sliding_window", window});
  if (window > 0) p.attrs().push_back({"sliding_window_pattern", kPattern});
  if (softcap > 0) p.attrs().push_back({"final_logit_softcapping", softcap});

  const RopeSpec global = rope_spec(hp, "neox");
  RopeSpec local = global;
  local.base = 10000.0;  // rope_freq_base_train_swa
  local.freq_scale = 1.0;

  const Operand embd = p.embed("embd", p.weight("token_embd.weight"));
  Operand x = p.scale("x0", embd, double(std::sqrt(float(hp.n_embd))));

  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Layer b(p, l);
    const bool is_local = window > 0 && l % kPattern < kPattern - 1;
    const Operand h = p.rms_norm(b("attn_in"), x, b.w("attn_norm"), hp.eps);
    AttentionWeights w = attention_weights(b);
    w.q_norm = b.w("attn_q_norm");
    w.k_norm = b.w("attn_k_norm");
    AttentionSpec attn = attention_spec(hp, l);
    attn.q_prescale = q_scale;  // llama.cpp: Qcur = ggml_scale(Qcur, f_attention_scale), kq_scale 1
    attn.window = is_local ? window : 0;
    const Operand a = attend(b, project_qkv(b, h, w), w, is_local ? local : global, attn);
    const Operand r = p.add(b("res"), x, p.rms_norm(b("attn_post"), a, b.w("post_attention_norm"), hp.eps));

    const Operand g = p.rms_norm(b("ffn_in"), r, b.w("ffn_norm"), hp.eps);
    const Operand y = gated_ffn(b, g, "geglu");
    x = p.add(b("out"), r, p.rms_norm(b("ffn_post"), y, b.w("post_ffw_norm"), hp.eps));
  }
  const Operand logits = lm_head(p, x);
  return p.finish(softcap > 0 ? p.softcap("logits_capped", logits, softcap) : logits);
}

}  // namespace port
