#include <gtest/gtest.h>

#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(Liveness, LastReaderInProgramOrder) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  const auto last = passes::last_use(l);
  auto value = [&](const char* n) { return l.ops[loom::testing::op_index(m, n)].out; };
  auto at = [&](const char* n) { return loom::testing::op_index(m, n); };
  EXPECT_EQ(last[value("b0.h")], at("b0.v"));   // read by q, k and v
  EXPECT_EQ(last[value("x")], at("b0.r"));      // the residual
  EXPECT_EQ(last[l.tokens], at("x"));
  EXPECT_EQ(last[l.positions], at("b1.a"));
  EXPECT_EQ(last[l.result], -1);                // the logits are returned, not read
}

TEST(Liveness, OpsMergedIntoOneStep) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  std::vector<int> pos(l.ops.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = int(i);
  const int q = loom::testing::op_index(m, "b0.q0");
  pos[q + 1] = pos[q + 2] = q;  // k and v run in q's step
  const auto last = passes::last_use(l, pos);
  EXPECT_EQ(last[l.ops[1].out], q);
}
