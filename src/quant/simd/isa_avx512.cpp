// Kernel set for AVX-512 F/BW/VL/VNNI (built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni; see CMakeLists.txt).
// Only called after dispatch.cpp has checked CPUID.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/simd/isa.h"
#define LOOM_SIMD_AVX512 1

namespace loom::quant::simd::detail::avx512 {
#include "quant/simd/isa_body.inc"
}  // namespace loom::quant::simd::detail::avx512
