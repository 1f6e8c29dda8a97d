// llama.cpp's quantization mixtures: the LLAMA_FTYPE file types and, per tensor, the type
// llama_tensor_get_type (src/llama-quant.cpp) picks for a file type without an importance
// matrix: 1-D tensors and norms stay as they are, output.weight (or a tied token_embd) gets
// Q6_K, attn_v/ffn_down get more bits on the layers use_more_bits selects, shapes whose row
// length is not a multiple of the block fall back (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, ...).
// Knows tensor names, not files.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"

namespace loom::quant {

struct FileType {
  std::string_view name;      // "Q4_K_M"
  uint32_t llama_ftype;       // LLAMA_FTYPE_MOSTLY_* value, written as general.file_type
  gguf::TensorType base;      // llama_ftype_get_default_type
};
// Case-insensitive; nullopt for names Loom does not support (IQ*, Q2_K_S: they need an imatrix).
std::optional<FileType> file_type_from_name(std::string_view name);
const std::vector<FileType>& file_types();

// What the rules read from the model's metadata.
struct ModelFacts {
  std::string arch;      // general.architecture
  int n_layer = 0;       // <arch>.block_count
  int n_head = 0;        // <arch>.attention.head_count
  int n_head_kv = 0;     // <arch>.attention.head_count_kv (defaults to n_head)
  int n_expert = 0;      // <arch>.expert_count
  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
  bool is_llama_70b() const { return arch == "llama" && n_layer == 80 && n_head != n_head_kv; }
};

struct TensorDesc {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order, dims[0] contiguous
  gguf::TensorType type;       // current type
};

struct TypeChoice {
  gguf::TensorType type;
  std::string note;  // non-empty when a fallback happened (llama-quantize's warning)
};

// Indices of `tensors` in llama.cpp's processing order (non-layer tensors by name, then
// blk.0.*, blk.1.*, ... by name): the order its counters advance in and it writes files in.
std::vector<size_t> llama_tensor_order(const std::vector<TensorDesc>& tensors);

// Per-tensor target types, indexed like `tensors`. Throws loom::Error for an unsupported shape.
std::vector<TypeChoice> choose_types(const ModelFacts& facts, const FileType& ftype,
                                     const std::vector<TensorDesc>& tensors);

}  // namespace loom::quant
