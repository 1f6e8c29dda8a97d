// The reference CPU backend: a straightforward, multi-threaded interpreter of the verified
// program — op by op through a kernel table, fp32 activations, weights read from the mapping
// in their stored type and used through quant's scalar reference (vec_dot, dequantize). Clarity over speed; it is the yardstick the
// fast backends are compared with.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace loom::backend::cpu {

std::unique_ptr<Backend> make_reference_backend();

}  // namespace loom::backend::cpu
