#include "synth/shapes.h"

#include "common/error.h"

namespace loom::synth {
namespace {

ModelShape llama(std::string name, uint32_t L, uint32_t E, uint32_t F, uint32_t H, uint32_t KV, uint32_t V,
                 float rope, uint32_t ctx, bool tied) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "llama";
  s.n_layer = L, s.n_embd = E, s.n_ff = F, s.n_head = H, s.n_head_kv = KV, s.head_dim = E / H;
  s.n_vocab = V, s.rope_base = rope, s.n_ctx = ctx, s.tied = tied;
  return s;
}

std::vector<ModelShape> table() {
  std::vector<ModelShape> t;
  // HuggingFaceTB/SmolLM2-135M
  t.push_back(llama("smollm2-135m", 30, 576, 1536, 9, 3, 49152, 100000.f, 8192, true));
  t.push_back(llama("smollm2-135m-untied", 30, 576, 1536, 9, 3, 49152, 100000.f, 8192, false));
  // meta-llama/Llama-3.2-1B, Meta-Llama-3-8B
  t.push_back(llama("llama3.2-1b", 16, 2048, 8192, 32, 8, 128256, 500000.f, 131072, true));
  t.push_back(llama("llama3.2-1b-untied", 16, 2048, 8192, 32, 8, 128256, 500000.f, 131072, false));
  t.push_back(llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 500000.f, 8192, false));
  t.push_back(llama("tiny-llama", 2, 64, 128, 4, 2, 512, 10000.f, 256, true));
  t.push_back(llama("tiny-llama-untied", 2, 64, 128, 4, 2, 512, 10000.f, 256, false));

  // Qwen/Qwen2-0.5B: biases on q, k, v.
  ModelShape q2 = llama("qwen2-0.5b", 24, 896, 4864, 14, 2, 151936, 1e6f, 32768, true);
  q2.arch = "qwen2", q2.qkv_bias = true, q2.rms_eps = 1e-6f;
  t.push_back(q2);
  ModelShape tq2 = llama("tiny-qwen2", 2, 64, 128, 4, 2, 512, 1e6f, 256, true);
  tq2.arch = "qwen2", tq2.qkv_bias = true, tq2.rms_eps = 1e-6f;
  t.push_back(tq2);

  // Qwen/Qwen3-0.6B: head_dim 128 (≠ n_embd / n_head), per-head q/k norms.
  ModelShape q3 = llama("qwen3-0.6b", 28, 1024, 3072, 16, 8, 151936, 1e6f, 40960, true);
  q3.arch = "qwen3", q3.head_dim = 128, q3.qk_norm = true, q3.rms_eps = 1e-6f;
  t.push_back(q3);
  ModelShape tq3 = llama("tiny-qwen3", 2, 64, 128, 4, 2, 512, 1e6f, 256, true);
  tq3.arch = "qwen3", tq3.head_dim = 32, tq3.qk_norm = true, tq3.rms_eps = 1e-6f;
  t.push_back(tq3);

  // google/gemma-3-270m: head_dim 256, sliding-window attention, sandwich norms.
  ModelShape g3 = llama("gemma3-270m", 18, 640, 2048, 4, 1, 262144, 1e6f, 32768, true);
  g3.arch = "gemma3", g3.head_dim = 256, g3.qk_norm = true, g3.post_norms = true, g3.sliding_window = 512;
  g3.rms_eps = 1e-6f;
  t.push_back(g3);
  ModelShape tg3 = llama("tiny-gemma3", 2, 64, 128, 4, 1, 512, 1e6f, 256, true);
  tg3.arch = "gemma3", tg3.head_dim = 32, tg3.qk_norm = true, tg3.post_norms = true, tg3.sliding_window = 16;
  tg3.rms_eps = 1e-6f;
  t.push_back(tg3);

  // microsoft/Phi-3-mini-4k-instruct: fused q|k|v and gate|up matrices, head_dim 96, untied.
  ModelShape p3 = llama("phi3-mini", 32, 3072, 8192, 32, 32, 32064, 10000.f, 4096, false);
  p3.arch = "phi3", p3.fused_qkv = true, p3.fused_gate_up = true;
  t.push_back(p3);
  ModelShape tp3 = llama("tiny-phi3", 2, 64, 128, 2, 2, 512, 10000.f, 256, false);
  tp3.arch = "phi3", tp3.fused_qkv = true, tp3.fused_gate_up = true;
  t.push_back(tp3);
  return t;
}

}  // namespace

std::vector<std::string> shape_names() {
  std::vector<std::string> n;
  for (const auto& s : table()) n.push_back(s.name);
  return n;
}

ModelShape find_shape(std::string_view name) {
  for (auto& s : table())
    if (s.name == name) return s;
  std::string known;
  for (const auto& n : shape_names()) known += (known.empty() ? "" : ", ") + n;
  loom::fail("synth: unknown shape '{}' (known: {})", name, known);
}

}  // namespace loom::synth
