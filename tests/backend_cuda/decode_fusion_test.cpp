// The CUDA backend's decode fusion pass and slot plan (decode_fusion.cpp, value_slots.cpp, plain
// C++: run without a GPU) on the two-layer tiny llama program: which ops join which step, where
// each step runs, the rules that keep an op out, and buffers that never alias while live.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "backend/cuda/decode_fusion.h"
#include "backend/cuda/value_slots.h"
#include "passes/tiny_program.h"

using namespace loom;
using loom::backend::cuda::DecodeFusion;
using loom::backend::cuda::FusedStep;
using loom::backend::cuda::FusionRules;

namespace {

ir::Module tiny_gemma() {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/tests/data/loom/tiny_gemma.loom";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ir::parse(ss.str(), path);
}

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

// The join of one activation row: each q/k/v launch takes its attention's ropes and KV store
// (llama's rope, pairs (2i, 2i + 1)); not when k is read by anything but its rope, nor with the
// fusion or the fold (the schedule key decode_rope_fold) off.
TEST(DecodeFusion, OneRowFoldsRopesIntoTheQkvLaunch) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  const DecodeFusion f = backend::cuda::fuse_decode(l, all_packed());
  auto step = [&](const char* n) { return f.steps[size_t(f.step_of_op[size_t(at(n))])]; };
  for (const char* b : {"b0", "b1"}) {
    const std::string p = b;
    EXPECT_EQ(step((p + ".v").c_str()).rope_attention, at((p + ".a").c_str())) << b;
    for (const char* other : {".r", ".s", ".y"}) EXPECT_EQ(step((p + other).c_str()).rope_attention, -1) << b << other;
  }
  EXPECT_EQ(f.def_op[size_t(l.ops[size_t(at("b0.q0"))].out)], at("b0.q0"));
  EXPECT_EQ(f.def_op[size_t(l.tokens)], -1);

  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/tests/data/loom/tiny_llama.loom");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string rope_q = "    %b1.q = rope";
  ASSERT_NE(text.find(rope_q), std::string::npos);
  text.insert(text.find(rope_q), "    %b1.kk = add %b1.k0, %b1.k0 : tensor<Tx8xf32>\n");
  const ir::Module m2 = ir::parse(text, "tiny_llama, k read twice");
  const passes::Lowering l2 = passes::lower(m2);
  auto at2 = [&](const char* n) { return loom::testing::op_index(m2, n); };
  const DecodeFusion f2 = backend::cuda::fuse_decode(l2, all_packed());
  auto step2 = [&](const char* n) { return f2.steps[size_t(f2.step_of_op[size_t(at2(n))])]; };
  EXPECT_EQ(step2("b0.v").rope_attention, at2("b0.a"));
  EXPECT_EQ(step2("b1.v").rope_attention, -1);

  FusionRules off = all_packed();
  off.enabled = false;
  for (const auto& st : backend::cuda::fuse_decode(l, off).steps) EXPECT_EQ(st.rope_attention, -1);
  FusionRules no_fold = all_packed();
  no_fold.fold_ropes = false;
  const DecodeFusion plain = backend::cuda::fuse_decode(l, no_fold);
  EXPECT_EQ(plain.steps.size(), f.steps.size());
  for (const auto& st : plain.steps) EXPECT_EQ(st.rope_attention, -1);
}

// Two values live in the same step (inclusive: a step's outputs and its dying inputs are live
// together) never share bytes of an arena row, fused or not.
TEST(ValueSlots, ValuesLiveTogetherNeverShareASlot) {
  for (const ir::Module& m : {loom::testing::tiny_llama(), tiny_gemma()})
  for (bool fused : {true, false}) {
    const passes::Lowering l = passes::lower(m);
    FusionRules r = all_packed();
    r.enabled = fused;
    const DecodeFusion f = backend::cuda::fuse_decode(l, r);
    const backend::cuda::ValueSlots vs = backend::cuda::plan_value_slots(l, f);
    const int end = int(f.steps.size());
    auto last = [&](int v) { return v == l.result ? end : std::max(vs.last_step[size_t(v)], vs.def_step[size_t(v)]); };
    std::vector<int> slotted;
    for (int v = 0; v < int(l.cols.size()); ++v)
      if (vs.def_step[size_t(v)] >= 0) slotted.push_back(v);
    ASSERT_EQ(slotted.size(), l.ops.size());
    for (int a : slotted)
      for (int b : slotted) {
        if (a >= b || vs.def_step[size_t(a)] > last(b) || vs.def_step[size_t(b)] > last(a)) continue;
        const int64_t a0 = vs.offset[size_t(a)], a1 = a0 + l.cols[size_t(a)] * 4;
        const int64_t b0 = vs.offset[size_t(b)], b1 = b0 + l.cols[size_t(b)] * 4;
        EXPECT_TRUE(a1 <= b0 || b1 <= a0) << "values " << a << " and " << b << " overlap (fused " << fused << ")";
      }
    // Re-use happens: the arena row is smaller than every value side by side.
    int64_t all = 0;
    for (int v : slotted) all += l.cols[size_t(v)] * 4;
    EXPECT_LT(vs.row_bytes, all);
    // The residual stream read after the last attention is gathered at the drop.
    EXPECT_EQ(vs.drop_step, f.step_of_op[size_t(l.last_mixing)]);
    EXPECT_FALSE(vs.live_at_drop.empty());
  }
}

// Gemma: q/k norms and post-norms stay their own steps (the norms are per head, and a
// projection read by a norm has no add to fold); rope + KV store still joins attention, gate
// and up carry the geglu.
TEST(DecodeFusion, GemmaLayerKeepsItsNorms) {
  const ir::Module m = tiny_gemma();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  const DecodeFusion f = backend::cuda::fuse_decode(l, all_packed());
  auto step = [&](const char* n) { return f.steps[size_t(f.step_of_op[size_t(at(n))])]; };
  EXPECT_EQ(step("b0.q").ops, (std::vector<int>{at("b0.q"), at("b0.k"), at("b0.a")}));
  EXPECT_EQ(step("b0.qn").ops, (std::vector<int>{at("b0.qn")}));
  EXPECT_EQ(step("b0.o").ops, (std::vector<int>{at("b0.o")}));
  EXPECT_EQ(step("b0.s").ops, (std::vector<int>{at("b0.g"), at("b0.u"), at("b0.s")}));
  EXPECT_EQ(step("b0.d").ops, (std::vector<int>{at("b0.d")}));
  EXPECT_EQ(step("b0.y").ops, (std::vector<int>{at("b0.y")}));
  // 48-wide gated output: not whole q8_1 blocks, so the down projection quantizes it itself.
  EXPECT_FALSE(f.gated_q8[size_t(at("b0.s"))]);
}
