// The device selection of each row's k largest logits (top_logits.cu) against the host's
// definition (backend::top_logits) on fresh random rows: vocabulary-sized rows and odd sizes,
// values coarse enough that the k-th is tied with many others (the ordered pass), rows where
// it is not (the atomic pass), a largest value repeated, -0 beside +0, several rows a launch.
// Outputs poisoned before each launch; the entries come back unordered and are sorted here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "random_inputs.h"

namespace loom::backend::cuda {
namespace {

TEST(TopLogits, DeviceSelectionIsTheHostsOnEveryRow) {
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  std::mt19937_64 rng(fresh_seed());
  for (int64_t V : {int64_t(128256), int64_t(49152), int64_t(1000), int64_t(37)}) {
    for (int k : {1, 2, 40, 64, 1024}) {
      if (k > V) continue;
      for (bool coarse : {false, true}) {
        const int64_t rows = 5;
        std::vector<float> x(size_t(rows * V));
        std::uniform_int_distribution<int> level(-64, 64);  // 129 values: the k-th tied with hundreds
        std::normal_distribution<float> fine(0.f, 3.f);
        for (auto& v : x) v = coarse ? float(level(rng)) / 16.f : fine(rng);
        x[0] = x[size_t(V - 1)] = 50.f;                              // row 0: the largest twice
        x[size_t(V + 1)] = -0.0f, x[size_t(V + 2)] = 0.0f;           // row 1: the two zeros
        std::fill(x.begin() + 2 * V, x.begin() + 3 * V, 1.25f);      // row 2: one value throughout
        auto dx = DeviceBuffer::of(x);
        DeviceBuffer out(size_t(rows * k) * 8);
        out.poison();
        int32_t* ids = out.get<int32_t>();
        top_logits(dx.get<float>(), rows, V, k, ids, reinterpret_cast<float*>(ids + rows * k), nullptr);
        LOOM_CUDA_CHECK(cudaDeviceSynchronize());
        const auto h = out.to_host<int32_t>();
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<TopLogit> got(static_cast<size_t>(k)), want(static_cast<size_t>(k));
          for (int j = 0; j < k; ++j) {
            const size_t at = size_t(r * k + j);
            float v;
            std::memcpy(&v, &h[size_t(rows * k) + at], 4);
            got[size_t(j)] = {h[at], v};
          }
          std::sort(got.begin(), got.end(), ranks_before);
          backend::top_logits({x.data() + r * V, size_t(V)}, k, want.data());
          for (int j = 0; j < k; ++j) {
            ASSERT_EQ(got[size_t(j)].id, want[size_t(j)].id)
                << "V " << V << " k " << k << (coarse ? " coarse" : " fine") << " row " << r << " entry " << j;
            ASSERT_EQ(got[size_t(j)].logit, want[size_t(j)].logit);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace loom::backend::cuda
