#include <gtest/gtest.h>

#include "ir/ops.h"
#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(OpView, EveryIrOpHasAnOpcodeAndBack) {
  EXPECT_EQ(int(ir::all_ops().size()), passes::kOpcodeCount);
  for (const auto& info : ir::all_ops()) {
    const auto c = passes::opcode_of(info.name);
    ASSERT_TRUE(c) << info.name;
    EXPECT_EQ(passes::opcode_name(*c), info.name);
  }
  EXPECT_FALSE(passes::opcode_of("matmull"));
}

TEST(OpView, TypedAttributes) {
  const ir::Module m = loom::testing::tiny_llama();
  const auto& body = m.find_func("step")->body;
  const auto a = passes::attention_attrs(body[loom::testing::op_index(m, "b1.a")]);
  EXPECT_EQ(a.layer, 1);
  EXPECT_EQ(a.n_head, 4);
  EXPECT_EQ(a.n_kv_head, 2);
  EXPECT_EQ(a.head_dim, 4);
  EXPECT_EQ(a.value_dim, 4);
  EXPECT_EQ(a.scale, 0.5);
  EXPECT_EQ(a.window, 0);  // optional, at its default
  EXPECT_EQ(a.softcap, 0.0);
  const auto r = passes::rope_attrs(body[loom::testing::op_index(m, "b0.q")]);
  EXPECT_EQ(r.head_dim, 4);
  EXPECT_EQ(r.n_rot, 4);
  EXPECT_EQ(r.base, 10000.0);
  EXPECT_FALSE(r.neox);
  EXPECT_EQ(r.freq_scale, 1.0);
  EXPECT_EQ(passes::norm_eps(body[1]), 1e-05);
}
