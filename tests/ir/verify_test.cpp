// The verifier's API beyond pass/fail: infer_type for porters, schedule warnings, globs, and
// messages for modules built in memory (no file, no lines).
#include <gtest/gtest.h>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace {

const char* kProgram = R"(module @m
  dim T in [1, 16]
  weight @emb   : tensor<10x8xq8_0> = gguf "e"
  weight @n     : tensor<8xf32>     = gguf "n"
  weight @blk0.w : tensor<4x8xq4_0> = gguf "w"
  func @step(%tok: tensor<Txi32>, %pos: tensor<Txi32>) -> tensor<Tx4xf32> {
    %x = embed @emb, %tok : tensor<Tx8xf32>
    %h = rms_norm %x, @n {eps = 1e-05} : tensor<Tx8xf32>
    %y = matmul %h, @blk0.w : tensor<Tx4xf32>
    return %y
  }
)";

TEST(InferType, GivesTheResultTypeFromOperands) {
  const ir::Module m = ir::parse(kProgram, "m.loom");
  const ir::Func& f = m.funcs[0];
  const ir::Type tok{{ir::Dim::symbol("T")}, ir::Elem::i32};
  const ir::Type act{{ir::Dim::symbol("T"), ir::Dim::of(8)}, ir::Elem::f32};
  auto lookup = [&](std::string_view n) -> const ir::Type* {
    if (n == "tok") return &tok;
    if (n == "h") return &act;
    return nullptr;
  };
  ir::Op op{"y", "matmul", {ir::Operand::value("h"), ir::Operand::weight("blk0.w")}, {}, {}};
  EXPECT_EQ(ir::print_type(ir::infer_type(m, f, op, lookup)), "tensor<Tx4xf32>");
  op = {"x", "embed", {ir::Operand::weight("emb"), ir::Operand::value("tok")}, {}, {}};
  EXPECT_EQ(ir::print_type(ir::infer_type(m, f, op, lookup)), "tensor<Tx8xf32>");
  op = {"s", "slice", {ir::Operand::value("h")}, {{"start", int64_t(2)}, {"size", int64_t(3)}}, {}};
  EXPECT_EQ(ir::print_type(ir::infer_type(m, f, op, lookup)), "tensor<Tx3xf32>");
  op = {"a", "attention", {ir::Operand::value("h"), ir::Operand::value("h"), ir::Operand::value("h"),
                           ir::Operand::value("tok")},
        {{"layer", int64_t(0)}, {"n_head", int64_t(4)}, {"n_kv_head", int64_t(2)}, {"head_dim", int64_t(2)},
         {"value_dim", int64_t(4)}, {"scale", 0.5}}, {}};
  // q is 4 x 2 = 8 wide, k 2 x 2 = 4: k (%h, 8 wide) does not fit.
  EXPECT_THROW(ir::infer_type(m, f, op, lookup), loom::Error);
  op = {"q", "matmul", {ir::Operand::value("nothing"), ir::Operand::weight("blk0.w")}, {}, {}};
  EXPECT_THROW(ir::infer_type(m, f, op, lookup), loom::Error);
}

TEST(Verify, InMemoryErrorsNameTheOpWithoutALine) {
  ir::Module m = ir::parse(kProgram, "m.loom");
  m.source.clear();
  for (auto& op : m.funcs[0].body) op.line = 0;
  m.funcs[0].body[2].type.shape[1] = ir::Dim::of(5);
  try {
    ir::verify(m);
    FAIL() << "accepted";
  } catch (const loom::Error& e) {
    EXPECT_STREQ(e.what(), "op %y (matmul): declared type tensor<Tx5xf32> but the operands give tensor<Tx4xf32>");
  }
}

TEST(Verify, ParsedErrorsNameFileAndLine) {
  ir::Module m = ir::parse(kProgram, "m.loom");
  m.funcs[0].body[1].attrs[0].value = std::string("x");
  try {
    ir::verify(m);
    FAIL() << "accepted";
  } catch (const loom::Error& e) {
    EXPECT_STREQ(e.what(), "m.loom:8: op %h (rms_norm): attribute 'eps' must be a number, found \"x\"");
  }
}

TEST(Verify, RejectsNamesThePrinterCouldNotReadBack) {
  ir::Module m = ir::parse(kProgram, "m.loom");
  m.weights[0].name = "has space";
  EXPECT_THROW(ir::verify(m), loom::Error);
  m = ir::parse(kProgram, "m.loom");
  m.dims[0].name = "tx";
  EXPECT_THROW(ir::verify(m), loom::Error);
  m = ir::parse(kProgram, "m.loom");
  m.attrs.push_back({"bad", std::numeric_limits<double>::infinity()});
  EXPECT_THROW(ir::verify(m), loom::Error);
}

TEST(Schedule, WarningsForSelectorsThatMatchNothing) {
  std::string text = kProgram;
  text += "  schedule { matmul(@blk*.w) = {kernel = \"a\"}, matmul(@nope*) = {kernel = \"b\"}, "
          "rms_norm(@blk*) = {x = 1}, threads = 2 }\n";
  const ir::Module m = ir::parse(text, "m.loom");
  ir::verify(m);
  const auto w = ir::schedule_warnings(m);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("matmul(@nope*)"), std::string::npos);
  EXPECT_NE(w[1].find("rms_norm(@blk*)"), std::string::npos);
}

TEST(Schedule, GlobalEntriesHoldOneSetting) {
  ir::Module m = ir::parse(kProgram, "m.loom");
  m.schedule.push_back({"", "", {{"a", int64_t(1)}, {"b", int64_t(2)}}, {}});
  EXPECT_THROW(ir::verify(m), loom::Error);
}

TEST(Glob, Matching) {
  EXPECT_TRUE(ir::glob_match("blk*.w*", "blk12.wq"));
  EXPECT_TRUE(ir::glob_match("*", ""));
  EXPECT_TRUE(ir::glob_match("blk?.wq", "blk3.wq"));
  EXPECT_FALSE(ir::glob_match("blk?.wq", "blk13.wq"));
  EXPECT_TRUE(ir::glob_match("*.w*", "a.b.wq"));
  EXPECT_FALSE(ir::glob_match("blk*.w", "blk1.wq"));
  EXPECT_TRUE(ir::glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(ir::glob_match("a*b*c", "aXXbYY"));
}

}  // namespace
