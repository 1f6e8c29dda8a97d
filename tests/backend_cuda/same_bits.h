// The CUDA kernel tests' bit-for-bit comparison of two device buffers of T (memcmp per element:
// NaNs and signed zeros compare by their bits).
#pragma once
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/device_buffer.h"

namespace loom::backend::cuda {

template <typename T>
void expect_same_bits(const DeviceBuffer& a, const DeviceBuffer& b, const char* what) {
  const auto x = a.to_host<T>(), y = b.to_host<T>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(std::memcmp(&x[i], &y[i], sizeof(T)), 0) << what << " at " << i;
}

}  // namespace loom::backend::cuda
