// The `dump_dir` schedule key of both CPU backends: a value's rows written as
// <dir>/<name>.f32 (rows x cols, row-major f32; a later step overwrites an earlier one), for
// comparing a run tensor by tensor with another engine's (scripts/compare-tensors).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::backend::cpu {

// Row r starts at data + r * row_stride_bytes. Best effort: a file that cannot be opened is
// skipped (a diagnosis aid must not stop the run).
void dump_value(const std::string& dir, const std::string& name, const void* data, int64_t rows, int64_t cols,
                size_t row_stride_bytes);

}  // namespace loom::backend::cpu
