#include <gtest/gtest.h>

#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(RowDrop, AfterTheLastAttention) {
  const ir::Module m = loom::testing::tiny_llama();
  const passes::Lowering l = passes::lower(m);
  EXPECT_EQ(l.last_mixing, loom::testing::op_index(m, "b1.a"));
  EXPECT_TRUE(l.has_mixing());
}

TEST(RowDrop, BeforeEverythingWithoutAttention) {
  const ir::Module m = loom::testing::tiny_llama();
  passes::Lowering l = passes::resolve_operands(m, *m.find_func("step"));
  for (auto& op : l.ops)
    if (op.code == passes::Opcode::attention) op.code = passes::Opcode::add;  // as if row by row
  passes::row_drop(l);
  EXPECT_EQ(l.last_mixing, -1);
  EXPECT_FALSE(l.has_mixing());
}
