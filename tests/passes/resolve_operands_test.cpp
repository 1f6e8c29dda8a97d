#include <gtest/gtest.h>

#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(ResolveOperands, ValuesAndWeights) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::resolve_operands(m, *m.find_func("step"));
  ASSERT_EQ(l.ops.size(), 33u);
  EXPECT_EQ(l.tokens, 0);
  EXPECT_EQ(l.positions, 1);
  EXPECT_EQ(l.cols.size(), 35u);  // two parameters and one value per op
  const auto& embed = l.ops[0];
  EXPECT_EQ(embed.code, passes::Opcode::embed);
  EXPECT_EQ(embed.in[0].weight, m.find_weight("tok_embd"));
  EXPECT_EQ(embed.in[1].value, l.tokens);
  const auto& q0 = l.ops[loom::testing::op_index(m, "b0.q0")];
  EXPECT_EQ(q0.code, passes::Opcode::matmul);
  EXPECT_EQ(q0.in[0].value, l.ops[1].out);
  EXPECT_EQ(q0.weight_name(), "blk0.wq");
  EXPECT_EQ(q0.cols, 16);
  EXPECT_EQ(l.cols[q0.out], 16);
  const auto& att = l.ops[loom::testing::op_index(m, "b0.a")];
  EXPECT_EQ(att.in[3].value, l.positions);
  EXPECT_EQ(att.weight_name(), "");
  EXPECT_EQ(l.result, l.ops.back().out);
  EXPECT_EQ(l.cols[l.result], 64);
}
