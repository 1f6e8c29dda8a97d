// The reference executor's bookkeeping: a prompt run at once equals the same prompt fed token
// by token through the KV cache (paged through block tables); rows dropped before the
// vocabulary projection do not change the wanted rows; two sequences in one step equal each
// run alone; weight binding, token and block-table errors are clear.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/reference.h"
#include "common/error.h"
#include "kv_fixture.h"
#include "tiny_model.h"

using namespace loom;
using loom::testing::TestKv;
using loom::testing::TinyModel;

namespace {

std::unique_ptr<backend::Plan> compile(const TinyModel& tm, int threads = 2) {
  auto be = backend::cpu::make_reference_backend();
  auto ws = backend::WeightSource::bind(tm.module, *tm.file);
  return be->compile(tm.module, ws, {threads});
}

TestKv cache_for(const backend::Plan& plan, backend::KvElem e = backend::KvElem::f32, int seqs = 1) {
  return TestKv(plan, e, 64, seqs, 4);
}

const std::vector<int32_t> kPrompt = {3, 17, 5, 36, 0, 9, 9, 21, 14, 2};

void expect_close(const float* a, const float* b, size_t n, float tol) {
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

}  // namespace

TEST(Reference, PrefillEqualsTokenByToken) {
  for (std::string mode : {"normal", "neox"})
    for (int64_t window : {0, 3}) {
      auto tm = loom::testing::make_tiny_model(mode, window);
      auto plan = compile(tm);
      const size_t V = TinyModel::V;
      auto kv = cache_for(*plan);
      std::vector<float> all(kPrompt.size() * V);
      kv.run(*plan, backend::StepBatch::sequence(kPrompt, 0, true), all.data());
      auto kv2 = cache_for(*plan);
      std::vector<float> one(V);
      for (size_t i = 0; i < kPrompt.size(); ++i) {
        kv2.run(*plan, backend::StepBatch::sequence({kPrompt[i]}, int32_t(i)), one.data());
        expect_close(one.data(), all.data() + i * V, V, 1e-4f);
      }
    }
}

TEST(Reference, WindowChangesLaterPositionsOnly) {
  auto full = loom::testing::make_tiny_model("normal", 0), swa = loom::testing::make_tiny_model("normal", 3);
  auto pf = compile(full), ps = compile(swa);
  const size_t V = TinyModel::V, n = kPrompt.size();
  std::vector<float> a(n * V), b(n * V);
  auto k1 = cache_for(*pf), k2 = cache_for(*ps);
  k1.run(*pf, backend::StepBatch::sequence(kPrompt, 0, true), a.data());
  k2.run(*ps, backend::StepBatch::sequence(kPrompt, 0, true), b.data());
  // Positions 0..2 see at most 3 keys either way (q - p < 3 holds for all of them).
  expect_close(a.data(), b.data(), 3 * V, 1e-5f);
  float diff = 0;
  for (size_t i = 3 * V; i < n * V; ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-3f);
}

TEST(Reference, LastRowOnlyMatchesAllRows) {
  auto tm = loom::testing::make_tiny_model();
  auto plan = compile(tm, 1);
  const size_t V = TinyModel::V, n = kPrompt.size();
  std::vector<float> all(n * V), last(V);
  auto k1 = cache_for(*plan), k2 = cache_for(*plan);
  k1.run(*plan, backend::StepBatch::sequence(kPrompt, 0, true), all.data());
  k2.run(*plan, backend::StepBatch::sequence(kPrompt, 0, false), last.data());
  expect_close(last.data(), all.data() + (n - 1) * V, V, 1e-5f);
}

TEST(Reference, TwoSequencesInOneStep) {
  auto tm = loom::testing::make_tiny_model();
  auto plan = compile(tm);
  const size_t V = TinyModel::V;
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {30, 20, 10};
  backend::StepBatch batch;
  for (size_t i = 0; i < a.size(); ++i) batch.tokens.push_back(a[i]), batch.positions.push_back(int32_t(i)), batch.seq_ids.push_back(0);
  for (size_t i = 0; i < b.size(); ++i) batch.tokens.push_back(b[i]), batch.positions.push_back(int32_t(i)), batch.seq_ids.push_back(1);
  batch.want_logits.assign(batch.size(), 1);
  auto kv = cache_for(*plan, backend::KvElem::f32, 2);
  std::vector<float> both(batch.size() * V), ra(a.size() * V), rb(b.size() * V);
  kv.run(*plan, batch, both.data());
  auto ka = cache_for(*plan), kb = cache_for(*plan);
  ka.run(*plan, backend::StepBatch::sequence(a, 0, true), ra.data());
  kb.run(*plan, backend::StepBatch::sequence(b, 0, true), rb.data());
  expect_close(both.data(), ra.data(), ra.size(), 1e-5f);
  expect_close(both.data() + ra.size(), rb.data(), rb.size(), 1e-5f);
}

TEST(Reference, F16CacheCloseToF32) {
  auto tm = loom::testing::make_tiny_model();
  auto plan = compile(tm);
  const size_t V = TinyModel::V, n = kPrompt.size();
  std::vector<float> a(n * V), b(n * V);
  auto k1 = cache_for(*plan, backend::KvElem::f32), k2 = cache_for(*plan, backend::KvElem::f16);
  k1.run(*plan, backend::StepBatch::sequence(kPrompt, 0, true), a.data());
  k2.run(*plan, backend::StepBatch::sequence(kPrompt, 0, true), b.data());
  expect_close(a.data(), b.data(), a.size(), 2e-2f);
}

TEST(Reference, BadTokenAndBadBindingAreErrors) {
  auto tm = loom::testing::make_tiny_model();
  auto plan = compile(tm);
  auto kv = cache_for(*plan);
  std::vector<float> out(TinyModel::V);
  EXPECT_THROW(kv.run(*plan, backend::StepBatch::sequence({TinyModel::V}, 0), out.data()), loom::Error);
  // Position 64 is past the 16 blocks of 4 positions the sequence's table holds.
  EXPECT_THROW(kv.run(*plan, backend::StepBatch::sequence({1}, 64), out.data()), loom::Error);
  EXPECT_THROW(plan->run(backend::StepBatch::sequence({1}, 0), *kv.storage, out.data()), loom::Error);  // no tables
  tm.module.weights[0].type.shape[0] = ir::Dim::of(38);
  EXPECT_THROW(backend::WeightSource::bind(tm.module, *tm.file), loom::Error);
  tm.module.weights[0].gguf_name = "missing";
  EXPECT_THROW(backend::WeightSource::bind(tm.module, *tm.file), loom::Error);
}
