// Single kernels against values worked out by hand from the op definitions (ir/ops.h).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/reference_kernels.h"
#include "backend/host_kv.h"

using namespace loom;
using namespace loom::backend::cpu;

namespace {
struct Harness {
  ThreadPool pool{2};
  backend::StepBatch batch;
  std::vector<backend::KvLayerShape> layers{{1, 4, 4}};
  backend::HostKvStorage kv{layers, 4, 4, backend::KvElem::f32};
  std::vector<int32_t> table{3, 1, 0, 2};  // sequence 0's blocks, out of order
  StepContext ctx{pool, batch, backend::HostKvView::bind(kv, batch, layers)};
  // What a plan's caller does before a step: the batch with its block table.
  void set_batch(backend::StepBatch b) {
    batch = std::move(b);
    batch.block_tables = {table};
    ctx.kv = backend::HostKvView::bind(kv, batch, layers);
  }
};

ir::Op make_op(std::string code, int n_in, int64_t cols, ir::Attrs at) {
  ir::Op op;
  op.result = "r";
  op.opcode = std::move(code);
  for (int i = 0; i < n_in; ++i) op.operands.push_back(ir::Operand::value("v" + std::to_string(i)));
  op.attrs = std::move(at);
  op.type = {{ir::Dim::symbol("T"), ir::Dim::of(cols)}, ir::Elem::f32};
  return op;
}

Tensor run(Harness& h, const ir::Op& op, std::vector<const Tensor*> in, int64_t rows) {
  Tensor out{rows, op.type.shape[1].value, {}, {}};
  KernelArgs a{op, in, std::vector<const gguf::TensorInfo*>(in.size()), std::vector<const float*>(in.size()), out, h.ctx};
  kernel_for(*passes::opcode_of(op.opcode))(a);
  return out;
}
}  // namespace

TEST(Kernels, RopeNormalAndNeox) {
  Harness h;
  Tensor x{1, 4, {1, 2, 3, 4}, {}}, pos{1, 1, {}, {3}};
  const float base = 100.f;
  const float t0 = 3.f, t1 = 3.f * std::pow(base, -2.f / 4.f);
  auto n = run(h, make_op("rope", 2, 4, {{"head_dim", int64_t(4)}, {"n_rot", int64_t(4)}, {"base", 100.0}, {"mode", std::string("normal")}}), {&x, &pos}, 1);
  EXPECT_NEAR(n.f[0], 1 * std::cos(t0) - 2 * std::sin(t0), 1e-5);
  EXPECT_NEAR(n.f[1], 1 * std::sin(t0) + 2 * std::cos(t0), 1e-5);
  EXPECT_NEAR(n.f[2], 3 * std::cos(t1) - 4 * std::sin(t1), 1e-5);
  EXPECT_NEAR(n.f[3], 3 * std::sin(t1) + 4 * std::cos(t1), 1e-5);
  auto x2 = run(h, make_op("rope", 2, 4, {{"head_dim", int64_t(4)}, {"n_rot", int64_t(4)}, {"base", 100.0}, {"mode", std::string("neox")}}), {&x, &pos}, 1);
  EXPECT_NEAR(x2.f[0], 1 * std::cos(t0) - 3 * std::sin(t0), 1e-5);
  EXPECT_NEAR(x2.f[2], 1 * std::sin(t0) + 3 * std::cos(t0), 1e-5);
  EXPECT_NEAR(x2.f[1], 2 * std::cos(t1) - 4 * std::sin(t1), 1e-5);
  EXPECT_NEAR(x2.f[3], 2 * std::sin(t1) + 4 * std::cos(t1), 1e-5);
}

TEST(Kernels, PartialRopeLeavesTail) {
  Harness h;
  Tensor x{1, 4, {1, 2, 3, 4}, {}}, pos{1, 1, {}, {5}};
  auto r = run(h, make_op("rope", 2, 4, {{"head_dim", int64_t(4)}, {"n_rot", int64_t(2)}, {"base", 10000.0}, {"mode", std::string("neox")}}), {&x, &pos}, 1);
  EXPECT_FLOAT_EQ(r.f[2], 3);
  EXPECT_FLOAT_EQ(r.f[3], 4);
}

TEST(Kernels, GegluSwigluSoftcapSlice) {
  Harness h;
  Tensor g{1, 3, {-1.f, 0.5f, 2.f}, {}}, u{1, 3, {2.f, 3.f, -1.f}, {}};
  auto gl = run(h, make_op("geglu", 2, 3, {}), {&g, &u}, 1);
  auto gelu = [](float x) { return 0.5f * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715f * x * x * x))); };
  // ggml's fp16 GELU table: exact up to fp16 rounding of input and output.
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(gl.f[i], gelu(g.f[i]) * u.f[i], 2e-3 * std::fabs(u.f[i]) + 1e-6);
  auto sw = run(h, make_op("swiglu", 2, 3, {}), {&g, &u}, 1);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(sw.f[i], g.f[i] / (1 + std::exp(-g.f[i])) * u.f[i], 1e-6);
  auto sc = run(h, make_op("softcap", 1, 3, {{"cap", 1.5}}), {&g}, 1);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(sc.f[i], 1.5f * std::tanh(g.f[i] / 1.5f), 1e-6);
  auto sl = run(h, make_op("slice", 1, 2, {{"start", int64_t(1)}, {"size", int64_t(2)}}), {&g}, 1);
  EXPECT_EQ(sl.f, (std::vector<float>{0.5f, 2.f}));
}

TEST(Kernels, AttentionAveragesVisibleValues) {
  Harness h;
  // Identical keys: the weights are uniform, so the output is the mean of the visible values.
  h.set_batch(backend::StepBatch::sequence({0, 0, 0}, 0, true));
  Tensor q{3, 4, std::vector<float>(12, 1.f), {}}, k{3, 4, std::vector<float>(12, 1.f), {}};
  Tensor v{3, 4, {1, 1, 1, 1, 2, 2, 2, 2, 6, 6, 6, 6}, {}}, pos{3, 1, {}, {0, 1, 2}};
  ir::Attrs at = {{"layer", int64_t(0)}, {"n_head", int64_t(1)}, {"n_kv_head", int64_t(1)}, {"head_dim", int64_t(4)},
                  {"value_dim", int64_t(4)}, {"scale", 0.5}};
  auto full = run(h, make_op("attention", 4, 4, at), {&q, &k, &v, &pos}, 3);
  EXPECT_NEAR(full.f[0], 1, 1e-6);
  EXPECT_NEAR(full.f[4], 1.5, 1e-6);
  EXPECT_NEAR(full.f[8], 3, 1e-6);
  at.push_back({"window", int64_t(2)});  // position 2 sees 1 and 2 only (2 - p < 2)
  auto swa = run(h, make_op("attention", 4, 4, at), {&q, &k, &v, &pos}, 3);
  EXPECT_NEAR(swa.f[8], 4, 1e-6);
}
