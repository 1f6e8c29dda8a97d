#include <gtest/gtest.h>

#include "common/error.h"
#include "passes/lowering.h"
#include "tiny_program.h"

using namespace loom;

TEST(StepContract, ReturnsStepOfAVerifiedModule) {
  const ir::Module m = loom::testing::tiny_llama();
  EXPECT_EQ(&passes::step_contract(m), m.find_func("step"));
}

TEST(StepContract, RefusesWhatTheVerifierRefuses) {
  ir::Module m = loom::testing::tiny_llama();
  m.funcs[0].body[0].operands[1].name = "pos";  // embed of positions
  EXPECT_THROW(passes::step_contract(m), loom::Error);
}

TEST(StepContract, NeedsAStepFunction) {
  ir::Module m = loom::testing::tiny_llama();
  m.funcs[0].name = "forward";
  try {
    passes::step_contract(m);
    FAIL() << "accepted a module without @step";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no func @step"), std::string::npos) << e.what();
  }
}
