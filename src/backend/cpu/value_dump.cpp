#include "backend/cpu/value_dump.h"

#include <cstdio>

namespace loom::backend::cpu {

void dump_value(const std::string& dir, const std::string& name, const void* data, int64_t rows, int64_t cols,
                size_t row_stride_bytes) {
  const std::string path = dir + "/" + name + ".f32";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  const auto* base = static_cast<const uint8_t*>(data);
  for (int64_t r = 0; r < rows; ++r) std::fwrite(base + size_t(r) * row_stride_bytes, sizeof(float), size_t(cols), f);
  std::fclose(f);
}

}  // namespace loom::backend::cpu
