// Writes GGUF v3 files that llama.cpp and the `gguf` Python package read back.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace gguf {

class Writer {
 public:
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}
  void set(std::string key, Value v);  // replaces an existing key, keeps first position
  // dims in GGUF order (dims[0] contiguous); data must be exactly the tensor's byte size.
  void add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type,
                  std::vector<uint8_t> data);
  void write(const std::string& path) const;  // throws loom::Error on I/O failure
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::vector<uint8_t> data;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace gguf
