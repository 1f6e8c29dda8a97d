// Port of the non-imatrix branches of llama.cpp's llama_tensor_get_type_impl and friends
// (src/llama-quant.cpp). IQ file types are not offered (they require an importance matrix),
// so their branches are absent.
#include "quant/mixture.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.h"

namespace loom::quant {
namespace {

using T = gguf::TensorType;

enum class Category { TokenEmbd, AttnQ, AttnV, AttnK, AttnQkv, AttnKvB, AttnOutput, FfnUp, FfnGate, FfnDown, Output, Other };

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

Category category_of(std::string_view n) {
  if (n == "output.weight") return Category::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::TokenEmbd;
  if (contains(n, "attn_qkv.weight")) return Category::AttnQkv;
  if (contains(n, "attn_kv_b.weight")) return Category::AttnKvB;
  if (contains(n, "attn_v.weight")) return Category::AttnV;
  if (contains(n, "attn_k.weight")) return Category::AttnK;
  if (contains(n, "attn_q.weight")) return Category::AttnQ;
  if (contains(n, "attn_output.weight")) return Category::AttnOutput;
  if (contains(n, "ffn_up")) return Category::FfnUp;
  if (contains(n, "ffn_gate")) return Category::FfnGate;
  if (contains(n, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

bool is_attn_v_like(Category c) { return c == Category::AttnV || c == Category::AttnQkv || c == Category::AttnKvB; }

int n_dims(const std::vector<uint64_t>& dims) {  // ggml_n_dims: trailing 1s do not count
  int n = int(dims.size());
  while (n > 1 && dims[size_t(n - 1)] == 1) --n;
  return std::max(n, 1);
}

// tensor_allows_quantization, for the tensor families of llama-style models and the small
// families llama.cpp names explicitly.
bool allows_quantization(const TensorDesc& t) {
  if (n_dims(t.dims) < 2) return false;
  const std::string_view n = t.name;
  if (n.size() < 6 || n.substr(n.size() - 6) != "weight") return false;
  for (std::string_view skip : {"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup",
                                "laurel", "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
                                "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
                                "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
                                "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
                                "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
                                "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
                                "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
                                ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
                                ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"})
    if (contains(n, skip)) return false;
  return n != "position_embd.weight" && n != "token_types.weight";
}

bool is_quantized(T t) { return t != T::F32 && t != T::F16 && t != T::BF16; }
int64_t block_of(T t) { return gguf::type_traits(t)->block_elems; }

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

struct State {
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;
  bool tied_embeddings = true;
};

// Layer index for the ffn counters: llama.cpp counts tensors unless the model has experts,
// in which case it parses blk.N from the name.
int layer_of(const ModelFacts& f, int counter, const std::string& name) {
  if (std::max(1, f.n_expert) <= 1) return counter;
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= f.n_layer)
    loom::fail("quantize: cannot determine the layer of tensor {}", name);
  return layer;
}

T mixture_type(State& qs, const ModelFacts& f, std::string_view ft, T new_type, const TensorDesc& t, Category cat) {
  const bool falcon = f.arch == "falcon";
  if (cat == Category::Output || (qs.tied_embeddings && cat == Category::TokenEmbd)) {
    if (falcon || int64_t(t.dims[0]) % block_of(new_type) != 0) return T::Q8_0;
    return new_type != T::Q8_0 ? T::Q6_K : new_type;
  }
  if (cat == Category::TokenEmbd) return new_type;
  if (is_attn_v_like(cat)) {
    if (ft == "Q2_K") new_type = f.n_gqa() >= 4 ? T::Q4_K : T::Q3_K;
    else if (ft == "Q3_K_M") new_type = qs.i_attention_wv < 2 ? T::Q5_K : T::Q4_K;
    else if (ft == "Q3_K_L") new_type = T::Q5_K;
    else if ((ft == "Q4_K_M" || ft == "Q5_K_M") && use_more_bits(qs.i_attention_wv, qs.n_attention_wv)) new_type = T::Q6_K;
    else if (ft == "Q4_K_S" && qs.i_attention_wv < 4) new_type = T::Q5_K;
    if (f.is_llama_70b() && (new_type == T::Q3_K || new_type == T::Q4_K)) new_type = T::Q5_K;
    if (f.n_expert == 8) new_type = T::Q8_0;
    ++qs.i_attention_wv;
  } else if (cat == Category::AttnK) {
    if (f.n_expert == 8) new_type = T::Q8_0;
  } else if (cat == Category::FfnDown) {
    const int i_layer = layer_of(f, qs.i_ffn_down, t.name), n_layer = qs.n_ffn_down;
    if (ft == "Q2_K") new_type = T::Q3_K;
    else if (ft == "Q3_K_M")
      new_type = i_layer < n_layer / 16 ? T::Q5_K : (!falcon || use_more_bits(i_layer, n_layer)) ? T::Q4_K : T::Q3_K;
    else if (ft == "Q3_K_L") new_type = falcon ? T::Q4_K : T::Q5_K;
    else if (ft == "Q4_K_M") {
      if (falcon) new_type = i_layer < n_layer / 16 ? T::Q6_K : use_more_bits(i_layer, n_layer) ? T::Q5_K : T::Q4_K;
      else if (use_more_bits(i_layer, n_layer)) new_type = T::Q6_K;
    } else if (ft == "Q5_K_M" && use_more_bits(i_layer, n_layer)) new_type = T::Q6_K;
    else if (ft == "Q4_K_S" && !falcon && i_layer < n_layer / 8) new_type = T::Q5_K;
    ++qs.i_ffn_down;
  } else if (cat == Category::AttnOutput) {
    if (!falcon) {
      if (f.n_expert == 8) {
        if (ft == "Q2_K" || ft == "Q3_K_S" || ft == "Q3_K_M" || ft == "Q4_K_S" || ft == "Q4_K_M") new_type = T::Q5_K;
      } else {
        if (ft == "Q2_K") new_type = T::Q3_K;
        else if (ft == "Q3_K_M") new_type = T::Q4_K;
        else if (ft == "Q3_K_L") new_type = T::Q5_K;
      }
    } else if (ft == "Q3_K_L") {
      new_type = T::Q4_K;
    }
  } else if (cat == Category::AttnQkv) {
    if (ft == "Q3_K_M" || ft == "Q3_K_L") new_type = T::Q4_K;
    else if (ft == "Q4_K_M") new_type = T::Q5_K;
    else if (ft == "Q5_K_M") new_type = T::Q6_K;
  } else if (cat == Category::FfnGate) {
    ++qs.i_ffn_gate;
  } else if (cat == Category::FfnUp) {
    ++qs.i_ffn_up;
  }
  return new_type;
}

// tensor_type_fallback: row lengths that are not a whole number of blocks.
TypeChoice fallback(const TensorDesc& t, T type) {
  const int64_t ncols = int64_t(t.dims[0]);
  if (ncols % block_of(type) == 0) return {type, ""};
  T to;
  switch (type) {
    case T::Q2_K: case T::Q3_K: to = T::Q4_0; break;
    case T::Q4_K: to = T::Q5_0; break;
    case T::Q5_K: to = T::Q5_1; break;
    case T::Q6_K: to = T::Q8_0; break;
    default: loom::fail("quantize: tensor {} has rows of {} elements; no fallback is defined for {}", t.name, ncols, gguf::type_name(type));
  }
  std::string note = fmt::format("ncols {} not divisible by {} (required for type {})", ncols, block_of(type), gguf::type_name(type));
  if (ncols % block_of(to) != 0) {
    note += " (must use F16 due to unusual shape)";
    to = T::F16;
  }
  note += fmt::format(" -> falling back to {}", gguf::type_name(to));
  return {to, note};
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int layer_number(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

}  // namespace

const std::vector<FileType>& file_types() {
  static const std::vector<FileType> v = {
      {"F32", 0, T::F32},      {"F16", 1, T::F16},       {"Q4_0", 2, T::Q4_0},    {"Q4_1", 3, T::Q4_1},
      {"Q8_0", 7, T::Q8_0},    {"Q5_0", 8, T::Q5_0},     {"Q5_1", 9, T::Q5_1},    {"Q2_K", 10, T::Q2_K},
      {"Q3_K_S", 11, T::Q3_K}, {"Q3_K_M", 12, T::Q3_K},  {"Q3_K_L", 13, T::Q3_K}, {"Q4_K_S", 14, T::Q4_K},
      {"Q4_K_M", 15, T::Q4_K}, {"Q5_K_S", 16, T::Q5_K},  {"Q5_K_M", 17, T::Q5_K}, {"Q6_K", 18, T::Q6_K},
      {"BF16", 32, T::BF16},
  };
  return v;
}

std::optional<FileType> file_type_from_name(std::string_view name) {
  for (const auto& f : file_types())
    if (iequal(f.name, name)) return f;
  return std::nullopt;
}

std::vector<size_t> llama_tensor_order(const std::vector<TensorDesc>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_number(tensors[a].name), lb = layer_number(tensors[b].name);
    if (la != lb) return la < lb;
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

std::vector<TypeChoice> choose_types(const ModelFacts& facts, const FileType& ftype,
                                     const std::vector<TensorDesc>& tensors) {
  State qs;
  for (const auto& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++qs.n_attention_wv;
    if (c == Category::Output) qs.tied_embeddings = false;
  }
  qs.n_ffn_down = facts.n_layer;
  std::vector<TypeChoice> out(tensors.size(), TypeChoice{T::F32, ""});
  for (size_t i : llama_tensor_order(tensors)) {
    const TensorDesc& t = tensors[i];
    if (!allows_quantization(t)) {
      out[i] = {t.type, ""};
      continue;
    }
    T type = ftype.base;
    if (is_quantized(type)) {
      type = mixture_type(qs, facts, ftype.name, type, t, category_of(t.name));
      out[i] = fallback(t, type);
    } else {
      out[i] = {type, ""};
    }
  }
  return out;
}

}  // namespace loom::quant
