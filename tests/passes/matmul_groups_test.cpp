#include <gtest/gtest.h>

#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(MatmulGroups, SharedInputsJoinTheFirstReader) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  const auto g = passes::group_matmuls(l, {});
  EXPECT_EQ(g[at("b0.k0")], at("b0.q0"));
  EXPECT_EQ(g[at("b0.v")], at("b0.q0"));
  EXPECT_EQ(g[at("b0.u")], at("b0.g"));
  EXPECT_EQ(g[at("b0.o")], at("b0.o"));  // alone on its input
  EXPECT_EQ(g[at("b0.q")], at("b0.q"));  // not a matmul
}

TEST(MatmulGroups, RulesLimitGroups) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  passes::GroupRules off;
  off.lookback = 0;
  const auto none = passes::group_matmuls(l, off);
  for (size_t i = 0; i < none.size(); ++i) EXPECT_EQ(none[i], int(i));
  passes::GroupRules pairs;
  pairs.max_parts = 2;
  const auto p = passes::group_matmuls(l, pairs);
  EXPECT_EQ(p[at("b0.k0")], at("b0.q0"));
  EXPECT_EQ(p[at("b0.v")], at("b0.v"));  // the q/k step is full
  passes::GroupRules picky;
  picky.compatible = [](const passes::LoweredOp&, const passes::LoweredOp& op) { return op.weight_name() != "blk0.wv"; };
  const auto c = passes::group_matmuls(l, picky);
  EXPECT_EQ(c[at("b0.k0")], at("b0.q0"));
  EXPECT_EQ(c[at("b0.v")], at("b0.v"));
}

TEST(MatmulGroups, NeverAcrossTheRowDrop) {
  // A matmul after the last attention reading a value read before it would, if grouped, run
  // before the rows are dropped: it stays in its own step.
  ir::Module m = loom::testing::tiny_llama();
  auto& body = m.funcs[0].body;
  const int a = loom::testing::op_index(m, "b1.a");
  ir::Op late = body[loom::testing::op_index(m, "b1.q0")];
  late.result = "late";
  body.insert(body.begin() + a + 1, late);
  const passes::Lowering l = passes::lower(m);
  const auto g = passes::group_matmuls(l, {});
  EXPECT_EQ(g[a + 1], a + 1);
}
