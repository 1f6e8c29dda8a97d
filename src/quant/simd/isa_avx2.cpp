// Kernel set for AVX2 + FMA + F16C, nothing newer (built with -mavx2 -mfma -mf16c -mno-avx512f; see CMakeLists.txt).
// Only called after dispatch.cpp has checked CPUID.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/simd/isa.h"


namespace loom::quant::simd::detail::avx2 {
#include "quant/simd/isa_body.inc"
}  // namespace loom::quant::simd::detail::avx2
