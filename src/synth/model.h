// Random-weight GGUF models of a named shape, written the way llama.cpp expects each
// architecture (tensor names, metadata keys), streamed tensor by tensor to disk.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/mixture.h"
#include "synth/shapes.h"

namespace loom::synth {

struct SynthOptions {
  uint64_t seed = 0;
  gguf::TensorType type = gguf::TensorType::F16;  // matrices and embeddings; norms and biases stay F32
  // Set: each matrix's type is the one llama-quantize's mixture for this file type picks
  // (quant/mixture.h; `type` is then unused), general.file_type says it.
  std::optional<quant::FileType> file_type;
  std::optional<uint32_t> n_vocab;                // override the shape's vocabulary size
  std::optional<uint32_t> n_layer;                // override the shape's layer count
  // 0: every matrix drawn with std 0.02 (as a real model's initialization). > 0: a layer's
  // matrices get std = gain / sqrt(fan-in) (their row length), capped at 0.02 — the random
  // network's per-layer gain fixed whatever the width (see model.cpp).
  double gain = 0;
};

// Types synth can write itself: F32, F16, BF16, the legacy quants (a normal draw quantized) and
// Q4_K, Q5_K, Q6_K (random codes: model.cpp); Q2_K and Q3_K are `loom quantize`'s.
bool synth_supports(gguf::TensorType t);

struct SynthTensor {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order
  gguf::TensorType type;
  enum Kind { Matrix, Norm, Bias } kind;
};
// The tensor table for a shape (after overrides), in file order.
std::vector<SynthTensor> synth_tensors(const ModelShape& s, gguf::TensorType type);

struct SynthResult {
  uint64_t tensors = 0, params = 0, bytes = 0;
};
SynthResult write_model(const ModelShape& shape, const SynthOptions& opt, const std::string& path);

}  // namespace loom::synth
