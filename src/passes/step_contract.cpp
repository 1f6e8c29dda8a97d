// Pass 1: the program a backend runs is a verified module with a @step function; the verifier
// holds the whole contract of @step (ir/verify.h), so backends accept exactly what it accepts.
#include "common/error.h"
#include "ir/verify.h"
#include "passes/lowering.h"

namespace loom::passes {

const ir::Func& step_contract(const ir::Module& m) {
  ir::verify(m);
  const ir::Func* f = m.find_func("step");
  if (!f) loom::fail("module @{} has no func @step (the function a backend runs)", m.name);
  return *f;
}

}  // namespace loom::passes
