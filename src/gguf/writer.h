// Writes GGUF v3 files that llama.cpp and the `gguf` Python package read back.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace gguf {

class Writer {
 public:
  // The data alignment; a `general.alignment` key set later overrides it. A value other than
  // GGUF's default 32 is written as `general.alignment` so readers agree on it.
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}
  void set(std::string key, Value v);  // replaces an existing key, keeps first position
  // dims in GGUF order (dims[0] contiguous); data must be exactly the tensor's byte size.
  void add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type,
                  std::vector<uint8_t> data);
  // Streaming: declares a tensor whose bytes the TensorSource passed to write() produces, so a
  // multi-gigabyte file never sits in memory at once.
  void declare_tensor(std::string name, std::vector<uint64_t> dims, TensorType type);
  void write(const std::string& path) const;  // throws loom::Error on I/O failure
  std::vector<uint8_t> to_bytes() const;      // every tensor must have been given its data

  struct TensorDecl {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    uint64_t nbytes;
  };
  // Fills `out` (exactly decl.nbytes) with tensor `index`'s bytes; called once per tensor in order.
  using TensorSource = std::function<void(size_t index, const TensorDecl& decl, std::span<uint8_t> out)>;
  void write(const std::string& path, const TensorSource& source) const;

  uint64_t alignment() const;
  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct Tensor {
    TensorDecl decl;
    std::optional<std::vector<uint8_t>> data;
  };
  using Sink = std::function<void(const uint8_t*, size_t)>;
  void emit(const Sink& sink, const TensorSource* source) const;
  void add(std::string name, std::vector<uint64_t> dims, TensorType type,
           std::optional<std::vector<uint8_t>> data);
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace gguf
