// Text → id look-up for token pieces: open addressing over string_views into storage owned by
// the caller, so the hot paths (SPM bigrams, BPE words) look up byte ranges without building
// std::strings.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::text {

inline uint64_t hash_bytes(std::string_view s) {
  // FNV-1a with a final avalanche; pieces are short, so this beats heavier hashes here.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

class PieceIndex {
 public:
  // `keys` must outlive the index; keys[i] maps to i. Duplicates keep the first id.
  void build(const std::vector<std::string_view>& keys) {
    size_t cap = 16;
    while (cap < keys.size() * 2) cap <<= 1;
    mask_ = cap - 1;
    slots_.assign(cap, Slot{});
    for (size_t i = 0; i < keys.size(); ++i) insert(keys[i], int32_t(i));
  }
  bool insert(std::string_view key, int32_t id) {
    size_t i = hash_bytes(key) & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].key == key) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, id};
    return true;
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    size_t i = hash_bytes(key) & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].key.size() == key.size() && slots_[i].key == key) return slots_[i].id;
      i = (i + 1) & mask_;
    }
    return -1;
  }

 private:
  struct Slot {
    std::string_view key;
    int32_t id = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace loom::text
