// Named model shapes for `loom synth`: the hyperparameters of real checkpoints (and tiny
// variants for fast tests), so random-weight files exercise exactly the real tensor layout.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::synth {

struct ModelShape {
  std::string name;
  std::string arch;          // GGUF general.architecture: llama, qwen2, qwen3, gemma3, phi3
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;     // key/value length per head
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;        // context_length written to the file
  float rope_base = 10000.f;
  float rms_eps = 1e-5f;
  bool tied = true;          // output.weight absent: llama.cpp reuses token_embd
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3, gemma3: per-head RMS norm on q and k
  bool post_norms = false;   // gemma3: post_attention_norm and post_ffw_norm
  uint32_t sliding_window = 0;  // gemma3
  bool fused_qkv = false;      // phi3: one attn_qkv matrix, q | k | v
  bool fused_gate_up = false;  // phi3: ffn_up holds gate | up (2 n_ff rows), no ffn_gate
  // Norm weights are ≈ 1 for every arch, gemma included: Gemma's checkpoints store w - 1, but
  // convert_hf_to_gguf.py folds the +1 in, so GGUF norms multiply plainly.
};

// Throws loom::Error listing the known names when `name` is not one of them.
ModelShape find_shape(std::string_view name);
std::vector<std::string> shape_names();

}  // namespace loom::synth
