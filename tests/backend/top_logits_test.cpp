// backend::top_logits (the order run_top's entries follow, and the host selection of the
// default Plan::run_top) against a full sort, on rows with many equal values; the default
// run_top against run() on the tiny model.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/reference.h"
#include "common/error.h"
#include "tiny_model.h"

using namespace loom;

namespace {
std::vector<backend::TopLogit> sorted_all(const std::vector<float>& row) {
  std::vector<backend::TopLogit> all(row.size());
  for (size_t i = 0; i < row.size(); ++i) all[i] = {int32_t(i), row[i]};
  std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.logit > b.logit; });  // ids ascending among equals
  return all;
}
}  // namespace

TEST(TopLogits, AreTheFirstKOfTheFullSort) {
  std::mt19937 g(std::random_device{}());
  for (size_t V : {1u, 7u, 1000u, 4099u}) {
    for (int32_t k : {1, 2, 3, 40, 64, 999}) {
      if (size_t(k) > V) continue;
      std::vector<float> row(V);
      std::uniform_int_distribution<int> coarse(-50, 50);  // ~100 distinct values: ties at every cut
      for (auto& v : row) v = float(coarse(g)) / 8.f;
      if (V > 2) row[V - 1] = row[0] = 100.f;  // the largest twice: the lower id first
      if (V > 3) row[1] = -0.0f, row[2] = 0.0f;  // equal to the host's comparisons
      const auto want = sorted_all(row);
      std::vector<backend::TopLogit> got(size_t(k), {-1, std::nanf("")});
      backend::top_logits(row, k, got.data());
      for (int32_t j = 0; j < k; ++j) {
        EXPECT_EQ(got[size_t(j)].id, want[size_t(j)].id) << "V " << V << " k " << k << " entry " << j;
        EXPECT_EQ(got[size_t(j)].logit, want[size_t(j)].logit);
      }
    }
  }
  std::vector<float> row(5, 1.f);
  backend::TopLogit out[6];
  EXPECT_THROW(backend::top_logits(row, 0, out), loom::Error);
  EXPECT_THROW(backend::top_logits(row, 6, out), loom::Error);
}

TEST(TopLogits, DefaultRunTopSelectsFromTheRowsRunGives) {
  const auto tm = loom::testing::make_tiny_model();
  auto ws = backend::WeightSource::bind(tm.module, *tm.file);
  auto be = backend::cpu::make_reference_backend();
  auto a = be->compile(tm.module, ws, {1}), b = be->compile(tm.module, ws, {1});
  auto kva = a->allocate_kv(8, 8, backend::KvElem::f32), kvb = b->allocate_kv(8, 8, backend::KvElem::f32);
  const std::vector<int32_t> block = {0, 1, 2};
  auto batch = backend::StepBatch::sequence({1, 5, 9, 2, 30}, 0, true);
  batch.block_tables = {block};
  const size_t V = size_t(a->vocab_size()), rows = batch.n_logit_rows();
  std::vector<float> logits(rows * V);
  a->run(batch, *kva, logits.data());
  const int32_t k = 4;
  std::vector<backend::TopLogit> top(rows * k);
  b->run_top(batch, *kvb, k, top.data());
  for (size_t r = 0; r < rows; ++r) {
    std::vector<backend::TopLogit> want(k);
    backend::top_logits({logits.data() + r * V, V}, k, want.data());
    for (int32_t j = 0; j < k; ++j) {
      EXPECT_EQ(top[r * k + size_t(j)].id, want[size_t(j)].id) << "row " << r;
      EXPECT_EQ(top[r * k + size_t(j)].logit, want[size_t(j)].logit);
    }
  }
  EXPECT_THROW(b->run_top(batch, *kvb, int32_t(V) + 1, top.data()), loom::Error);
}
