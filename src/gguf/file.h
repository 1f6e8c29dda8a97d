// A GGUF v2/v3 file, memory-mapped and validated before anything reads it: every count,
// string length, offset, dimension and alignment is checked against the file size, and a
// failure names the byte offset and the field (loom::Error).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/hash_cache.h"
#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace gguf {

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension
  TensorType type = TensorType::F32;
  uint64_t offset = 0;         // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping
  uint64_t elements() const;
  uint64_t row_elems() const { return dims.empty() ? 1 : dims[0]; }
  uint64_t rows() const { return dims.empty() ? 1 : elements() / dims[0]; }
};

class File {
 public:
  // Maps and validates `path`. Throws loom::Error with the offset and field on any defect.
  static File open(const std::string& path);
  // Validates an in-memory image (used by the fuzzer and tests). The bytes must outlive File.
  static File from_bytes(std::span<const uint8_t> bytes, std::string label = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key) const;  // throws naming the missing key
  // Typed look-ups with defaults; throw when present with the wrong type.
  std::string get_string(std::string_view key, std::string def = "") const;
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_float(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  std::string architecture() const { return get_string("general.architecture"); }

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws naming the tensor

  // SHA-256 of the whole file, hex; computed on first call, or taken from HashCache::standard()
  // when the cache's entry is for this very version of the file (see gguf/hash_cache.h).
  const std::string& sha256() const;
  // The file on disk as it was mapped; nullopt for from_bytes images.
  const std::optional<FileIdentity>& identity() const { return identity_; }
  int64_t opened_ns() const { return opened_ns_; }  // CLOCK_REALTIME at open

 private:
  File() = default;
  void parse();
  std::string path_;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  mutable std::string sha256_;
  std::optional<FileIdentity> identity_;
  int64_t opened_ns_ = 0;
};

}  // namespace gguf
