// Quantizes a whole GGUF model file the way llama-quantize does (no importance matrix): all
// metadata copied, general.file_type / general.quantization_version set, per-tensor types from
// mixture.h, tensors written in llama.cpp's order. Streams one tensor at a time; already
// quantized inputs are dequantized first (with a warning).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "quant/mixture.h"

namespace loom::quant {

struct QuantizeOptions {
  FileType ftype;
  int threads = 2;
  std::function<void(const std::string&)> log;  // one line per tensor, warnings, summary
};

struct QuantizeSummary {
  uint64_t bytes_in = 0, bytes_out = 0, elements = 0;
  int tensors = 0, quantized = 0, fallbacks = 0, requantized = 0;
};

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& opts);

}  // namespace loom::quant
