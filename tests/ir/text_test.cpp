// Print/parse round trips: the example programs, programs built in memory, and the values
// that are easy to get wrong (floats, escapes, alignment).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> examples() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(LOOM_SOURCE_DIR) / "tests/data/loom"))
    if (e.path().extension() == ".loom") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void expect_round_trip(const ir::Module& m) {
  const std::string once = ir::print(m);
  const ir::Module back = ir::parse(once, "printed.loom");
  EXPECT_TRUE(back == m) << once;
  EXPECT_EQ(ir::print(back), once);
}

TEST(Examples, ParseVerifyRoundTrip) {
  const auto files = examples();
  ASSERT_GE(files.size(), 3u);
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    const ir::Module m = ir::parse(read(p), p.string());
    ir::verify(m);
    EXPECT_TRUE(ir::schedule_warnings(m).empty());
    expect_round_trip(m);
    ASSERT_FALSE(m.funcs.empty());
    EXPECT_GT(m.funcs[0].body.size(), 20u);
  }
}

TEST(Examples, OpLinesPointAtTheSource) {
  const auto path = fs::path(LOOM_SOURCE_DIR) / "tests/data/loom/tiny_llama.loom";
  const std::string text = read(path);
  const ir::Module m = ir::parse(text, path.string());
  std::istringstream lines(text);
  std::string line;
  std::vector<std::string> by_number{""};
  while (std::getline(lines, line)) by_number.push_back(line);
  for (const auto& op : m.funcs[0].body) {
    ASSERT_GT(op.line, 0);
    EXPECT_NE(by_number[op.line].find("%" + op.result + " "), std::string::npos) << op.result;
  }
  EXPECT_EQ(m.source, path.string());
}

TEST(Examples, ScheduleEntriesKeepTheirForms) {
  const auto path = fs::path(LOOM_SOURCE_DIR) / "tests/data/loom/tiny_llama_scheduled.loom";
  const ir::Module m = ir::parse(read(path), path.string());
  ASSERT_EQ(m.schedule.size(), 6u);
  EXPECT_EQ(m.schedule[0].opcode, "matmul");
  EXPECT_EQ(m.schedule[0].selector, "blk*.w?");
  EXPECT_EQ(m.schedule[2].opcode, "attention");
  EXPECT_TRUE(m.schedule[2].selector.empty());
  EXPECT_TRUE(m.schedule[3].opcode.empty());
  EXPECT_EQ(ir::attr_int(m.schedule[3].settings, "threads"), 2);
  EXPECT_EQ(m.schedule[1].settings[1].value, ir::AttrValue(std::vector<int64_t>{4, 8}));
}

// The canonical form, spelled out: section order, blank lines, aligned columns.
TEST(Printer, CanonicalLayout) {
  const std::string src =
      "module @m {arch = \"llama\", gguf.sha256 = \"ab\", n = 2, on = true}\n"
      "dim T in [1,8] weight @a.long_name : tensor<4x8xq4_k> = gguf \"a\" weight @b : tensor<8xf32> = gguf \"b\"\n"
      "schedule { threads = 2 }\n"
      "func @f(%t: tensor<Txi32>) -> (tensor<Tx4xf32>, tensor<Tx8xf32>) {\n"
      "%x = embed @a.long_name, %t : tensor<Tx8xf32> %hh = rms_norm %x, @b {eps = 1e-05} : tensor<Tx8xf32>\n"
      "%y = matmul %hh, @a.long_name : tensor<Tx4xf32> return %y, %hh }\n";
  const std::string want =
      "module @m {arch = \"llama\", gguf.sha256 = \"ab\", n = 2, on = true}\n"
      "  dim T in [1, 8]\n"
      "\n"
      "  weight @a.long_name : tensor<4x8xq4_k> = gguf \"a\"\n"
      "  weight @b           : tensor<8xf32>    = gguf \"b\"\n"
      "\n"
      "  func @f(%t: tensor<Txi32>) -> (tensor<Tx4xf32>, tensor<Tx8xf32>) {\n"
      "    %x  = embed @a.long_name, %t        : tensor<Tx8xf32>\n"
      "    %hh = rms_norm %x, @b {eps = 1e-05} : tensor<Tx8xf32>\n"
      "    %y  = matmul %hh, @a.long_name      : tensor<Tx4xf32>\n"
      "    return %y, %hh\n"
      "  }\n"
      "\n"
      "  schedule {\n"
      "    threads = 2\n"
      "  }\n";
  const ir::Module m = ir::parse(src, "layout.loom");
  EXPECT_NO_THROW(ir::verify(m));
  EXPECT_EQ(ir::print(m), want);
  expect_round_trip(m);
}

TEST(Printer, FloatsRoundTripExactlyAndStayFloats) {
  const std::vector<double> xs = {0.0, -0.0, 1.0, -2.0, 0.1, 1e-05, 1e-06, 10000.0, 1000000.0, 0.125,
                                  1.0 / 3.0, 1e300, 5e-324, std::numeric_limits<double>::max(), 123456789.0,
                                  1e16, 1e22, -1.5e-7};
  for (double x : xs) {
    const std::string s = ir::print_attr_value(x);
    ir::Module m;
    m.name = "f";
    m.attrs = {{"v", x}};
    const ir::Module back = ir::parse(ir::print(m), "f.loom");
    ASSERT_EQ(back.attrs.size(), 1u);
    const double* y = std::get_if<double>(&back.attrs[0].value);
    ASSERT_NE(y, nullptr) << s << " came back as a non-float";
    EXPECT_EQ(std::bit_cast<uint64_t>(*y), std::bit_cast<uint64_t>(x)) << s;
  }
  EXPECT_EQ(ir::print_attr_value(1e-05), "1e-05");
  EXPECT_EQ(ir::print_attr_value(10000.0), "10000.0");
  EXPECT_EQ(ir::print_attr_value(0.5), "0.5");
}

TEST(Printer, IntegersIncludingExtremes) {
  for (int64_t v : {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    ir::Module m;
    m.name = "i";
    m.attrs = {{"v", v}, {"l", std::vector<int64_t>{v, -v / 2}}};
    expect_round_trip(m);
  }
}

TEST(Printer, StringsWithEveryByte) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += char(c);
  ir::Module m;
  m.name = "s";
  m.attrs = {{"all", all}, {"empty", std::string()}, {"quote", std::string("say \"hi\" \\ bye")}};
  m.weights = {{"w", {{ir::Dim::of(2)}, ir::Elem::f32}, "odd \"name\"\n\x01"}};
  expect_round_trip(m);
  EXPECT_EQ(ir::print_attr_value(std::string("a\"b\\c\n\x01")), "\"a\\\"b\\\\c\\n\\x01\"");
}

TEST(Printer, EveryElementType) {
  ir::Module m;
  m.name = "e";
  const char* names[] = {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
                         "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"};
  for (const char* n : names) {
    auto e = ir::elem_from_name(n);
    ASSERT_TRUE(e.has_value()) << n;
    m.weights.push_back({std::string("w_") + n, {{ir::Dim::of(256), ir::Dim::of(4)}, *e}, n});
  }
  EXPECT_NO_THROW(ir::verify(m));
  expect_round_trip(m);
  EXPECT_NE(ir::print(m).find("tensor<256x4xq4_k>"), std::string::npos);
}

TEST(Printer, ZeroResultsAndScalars) {
  const std::string src = "module @z\n func @f(%a: tensor<f32>) -> () { return }\n";
  const ir::Module m = ir::parse(src, "z.loom");
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_TRUE(m.funcs[0].result_types.empty());
  EXPECT_TRUE(m.funcs[0].params[0].type.shape.empty());
  EXPECT_NO_THROW(ir::verify(m));
  expect_round_trip(m);
}

TEST(Parser, CommentsAndLayoutDoNotMatter) {
  const std::string a = "module @m // name\n// whole line\n  dim T in [1, 4] // why\n";
  const std::string b = "module @m dim T in [1,4]";
  EXPECT_TRUE(ir::parse(a, "a") == ir::parse(b, "b"));
}

TEST(Parser, ErrorsNameFileLineColumnAndToken) {
  try {
    ir::parse("module @m\n  dim T in [1, 4\n", "x.loom");
    FAIL() << "accepted";
  } catch (const loom::Error& e) {
    EXPECT_STREQ(e.what(), "x.loom:3:1: expected ']', found end of file");
  }
}

TEST(Parser, EmptyInput) { EXPECT_THROW(ir::parse("", "e.loom"), loom::Error); }

TEST(Equality, IgnoresLinesAndSource) {
  ir::Module a = ir::parse("module @m func @f(%t: tensor<f32>) -> tensor<f32> { %y = scale %t {factor = 2.0} : tensor<f32> return %y }", "a");
  ir::Module b = ir::parse("module @m\nfunc @f(%t: tensor<f32>) -> tensor<f32> {\n\n%y = scale %t {factor = 2.0} : tensor<f32>\nreturn %y }", "b");
  EXPECT_NE(a.funcs[0].body[0].line, b.funcs[0].body[0].line);
  EXPECT_TRUE(a == b);
  b.funcs[0].body[0].attrs[0].value = 3.0;
  EXPECT_FALSE(a == b);
}

}  // namespace
