// The CUDA backend's decode fusion pass (decode_fusion.cpp, plain C++: runs without a GPU) on
// the two-layer tiny llama program: which ops join which step, where each step runs, and the
// rules that keep an op out.
#include <gtest/gtest.h>

#include "backend/cuda/decode_fusion.h"
#include "passes/tiny_program.h"

using namespace loom;
using loom::backend::cuda::DecodeFusion;
using loom::backend::cuda::FusedStep;
using loom::backend::cuda::FusionRules;

namespace {

FusionRules all_packed() {
  FusionRules r;
  r.packed = [](const passes::LoweredOp&) { return true; };
  r.whole_row_norm = [](const passes::LoweredOp&) { return true; };
  return r;
}

}  // namespace

TEST(DecodeFusion, LlamaLayerIsSevenSteps) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  const DecodeFusion f = backend::cuda::fuse_decode(l, all_packed());
  // embed, then per layer: norm; q/k/v; rope + rope + attention; o + residual; norm;
  // gate/up + swiglu; down + residual; then the output norm and the logits.
  EXPECT_EQ(f.steps.size(), 1u + 2 * 7 + 2);
  auto step = [&](const char* n) { return f.steps[size_t(f.step_of_op[size_t(at(n))])]; };
  EXPECT_EQ(step("b0.k0").ops, (std::vector<int>{at("b0.q0"), at("b0.k0"), at("b0.v")}));
  EXPECT_EQ(step("b0.v").kind, FusedStep::Kind::matmuls);
  EXPECT_EQ(step("b0.v").epilogue_op, -1);
  EXPECT_EQ(step("b0.q").kind, FusedStep::Kind::rope_attention);
  EXPECT_EQ(step("b0.q").ops, (std::vector<int>{at("b0.q"), at("b0.k"), at("b0.a")}));
  EXPECT_EQ(step("b0.r").ops, (std::vector<int>{at("b0.o"), at("b0.r")}));
  EXPECT_EQ(step("b0.r").epilogue_op, at("b0.r"));
  EXPECT_EQ(step("b0.s").ops, (std::vector<int>{at("b0.g"), at("b0.u"), at("b0.s")}));
  EXPECT_EQ(step("b1.y").epilogue_op, at("b1.y"));
  // A step runs where its first op is: a joined matmul or an epilogue moves earlier, the ropes
  // move to their attention; steps run in program order of those anchors.
  EXPECT_EQ(f.step_of_op[size_t(at("b0.s"))], f.step_of_op[size_t(at("b0.g"))]);
  for (size_t s = 1; s < f.steps.size(); ++s) EXPECT_LT(f.steps[s - 1].ops.front(), f.steps[s].ops.front());
  // Rows 16 wide are not whole q8_1 blocks: nothing writes q8_1 beside its f32 output.
  for (size_t i = 0; i < l.ops.size(); ++i) EXPECT_FALSE(f.norm_q8[i] || f.attention_q8[i]) << i;
}

TEST(DecodeFusion, OffOrUnpackedLeavesOpsAlone) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  FusionRules off = all_packed();
  off.enabled = false;
  const DecodeFusion none = backend::cuda::fuse_decode(l, off);
  ASSERT_EQ(none.steps.size(), l.ops.size());
  for (size_t i = 0; i < l.ops.size(); ++i) EXPECT_EQ(none.step_of_op[i], int(i));
  // Matmuls on the dequantizing kernels stay one launch each (no epilogues); rope + KV store
  // still fuses with attention.
  FusionRules unpacked = all_packed();
  unpacked.packed = [](const passes::LoweredOp&) { return false; };
  const DecodeFusion f = backend::cuda::fuse_decode(l, unpacked);
  EXPECT_EQ(f.steps.size(), l.ops.size() - 2 * 2);
  for (const auto& s : f.steps) EXPECT_NE(s.kind, FusedStep::Kind::matmuls);
}

TEST(DecodeFusion, OnlyPackedMatmulsJoin) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  FusionRules r = all_packed();
  r.packed = [](const passes::LoweredOp& lo) { return lo.weight_name() != "blk0.wv" && lo.weight_name() != "blk0.w_up"; };
  const DecodeFusion f = backend::cuda::fuse_decode(l, r);
  auto step = [&](const char* n) { return f.steps[size_t(f.step_of_op[size_t(at(n))])]; };
  EXPECT_EQ(step("b0.q0").ops, (std::vector<int>{at("b0.q0"), at("b0.k0")}));
  EXPECT_EQ(step("b0.v").ops, (std::vector<int>{at("b0.v")}));
  // Gate alone cannot carry the swiglu (up is not on the integer-dot path).
  EXPECT_EQ(step("b0.g").ops, (std::vector<int>{at("b0.g")}));
  EXPECT_EQ(step("b0.s").ops, (std::vector<int>{at("b0.s")}));
}
