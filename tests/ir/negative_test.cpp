// Malformed programs: each must fail with a message that names the place (line:col for syntax,
// line for meaning) and says what is wrong. The base program is valid; every case edits one
// line of it (or adds lines after it).
#include <gtest/gtest.h>

#include <sstream>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace {

const std::vector<std::string> kBase = {
    /* 1 */ "module @m {arch = \"test\"}",
    /* 2 */ "  dim T in [1, 16]",
    /* 3 */ "  weight @emb : tensor<10x8xq8_0> = gguf \"e\"",
    /* 4 */ "  weight @n : tensor<8xf32> = gguf \"n\"",
    /* 5 */ "  weight @w : tensor<4x8xq4_0> = gguf \"w\"",
    /* 6 */ "  func @step(%tok: tensor<Txi32>, %pos: tensor<Txi32>) -> tensor<Tx4xf32> {",
    /* 7 */ "    %x = embed @emb, %tok : tensor<Tx8xf32>",
    /* 8 */ "    %h = rms_norm %x, @n {eps = 1e-05} : tensor<Tx8xf32>",
    /* 9 */ "    %y = matmul %h, @w : tensor<Tx4xf32>",
    /* 10 */ "    return %y",
    /* 11 */ "  }",
};

struct Case {
  const char* name;
  int line;                 // 1-based line of kBase to replace
  std::string replacement;  // may hold several lines, or be empty to delete the line
  std::vector<std::string> expect;  // substrings of the error message
};

std::string program(const Case& c) {
  std::ostringstream s;
  for (int i = 0; i < int(kBase.size()); ++i) {
    if (i + 1 != c.line) {
      s << kBase[i] << "\n";
    } else if (!c.replacement.empty()) {
      s << c.replacement << "\n";
    }
  }
  return s.str();
}

const std::string kAttn = "    %a = attention %h, %h, %h, %pos {layer = 0, n_head = 2, n_kv_head = 2, head_dim = 4, "
                          "value_dim = 4, scale = 0.5} : tensor<Tx8xf32>";

std::string after8(const std::string& extra) { return kBase[7] + "\n" + extra; }

const std::vector<Case> kCases = {
    {"missing_type", 9, "    %y = matmul %h, @w", {"t.loom:10:5:", "expected ':' and the result type", "'return'"}},
    {"missing_type_after_colon", 9, "    %y = matmul %h, @w :", {"t.loom:10:5:", "expected a type", "'return'"}},
    {"undefined_value", 9, "    %y = matmul %zz, @w : tensor<Tx4xf32>", {"t.loom:9:", "op %y (matmul)", "%zz is not defined"}},
    {"used_before_defined", 8, "    %h = rms_norm %y, @n {eps = 1e-05} : tensor<Tx8xf32>",
     {"t.loom:8:", "%y is used before it is defined"}},
    {"redefinition", 9, "    %x = matmul %h, @w : tensor<Tx4xf32>", {"t.loom:9:5:", "%x is defined twice"}},
    {"parameter_redefined", 8, "    %tok = rms_norm %x, @n {eps = 1e-05} : tensor<Tx8xf32>",
     {"t.loom:8:5:", "%tok is defined twice"}},
    {"unknown_op", 9, "    %y = matmult %h, @w : tensor<Tx4xf32>", {"t.loom:9:", "unknown op 'matmult'"}},
    {"wrong_operand_count", 9, "    %y = matmul %h : tensor<Tx4xf32>", {"t.loom:9:", "takes 2 operands, has 1"}},
    {"rope_operand_count", 9, "    %y = rope %h : tensor<Tx8xf32>", {"t.loom:9:", "takes 2 to 3 operands, has 1"}},
    {"matmul_shape_mismatch", 5, "  weight @w : tensor<4x9xq4_0> = gguf \"w\"",
     {"t.loom:9:", "op %y (matmul)", "inner dimensions (8 and 9) differ"}},
    {"declared_type_mismatch", 9, "    %y = matmul %h, @w : tensor<Tx5xf32>",
     {"t.loom:9:", "declared type tensor<Tx5xf32> but the operands give tensor<Tx4xf32>"}},
    {"undeclared_dim_param", 2, "  dim S in [1, 16]", {"parameter %tok", "dim T is not declared"}},
    {"undeclared_dim_op", 9, "    %y = matmul %h, @w : tensor<Qx4xf32>", {"t.loom:9:", "dim Q is not declared"}},
    {"bad_attr_type_string", 8, "    %h = rms_norm %x, @n {eps = \"small\"} : tensor<Tx8xf32>",
     {"t.loom:8:", "attribute 'eps' must be a number, found \"small\""}},
    {"bad_attr_type_float_for_int", 8, after8("    %s = slice %h {start = 0.5, size = 2} : tensor<Tx2xf32>"),
     {"t.loom:9:", "attribute 'start' must be an integer, found 0.5"}},
    {"bad_attr_type_mode", 8,
     after8("    %r = rope %h, %pos {head_dim = 4, n_rot = 4, base = 10000.0, mode = 2} : tensor<Tx8xf32>"),
     {"t.loom:9:", "attribute 'mode' must be a string, found 2"}},
    {"bad_rope_mode", 8,
     after8("    %r = rope %h, %pos {head_dim = 4, n_rot = 4, base = 10000.0, mode = \"sideways\"} : tensor<Tx8xf32>"),
     {"t.loom:9:", "must be \"normal\" or \"neox\""}},
    {"unterminated_string", 3, "  weight @emb : tensor<10x8xq8_0> = gguf \"e", {"t.loom:3:42:", "unterminated string"}},
    {"bad_escape", 3, "  weight @emb : tensor<10x8xq8_0> = gguf \"e\\q\"", {"t.loom:3:44:", "bad escape '\\q'"}},
    {"bad_number", 2, "  dim T in [1, 16q]", {"t.loom:2:16:", "bad number '16q'"}},
    {"bad_number_fraction", 8, "    %h = rms_norm %x, @n {eps = 1.} : tensor<Tx8xf32>",
     {"t.loom:8:33:", "expected digits after '.'"}},
    {"float_out_of_range", 8, "    %h = rms_norm %x, @n {eps = 1e999} : tensor<Tx8xf32>",
     {"t.loom:8:33:", "out of range for a 64-bit float"}},
    {"int_out_of_range", 2, "  dim T in [1, 99999999999999999999]", {"t.loom:2:16:", "out of range for a 64-bit integer"}},
    {"unknown_elem_type", 5, "  weight @w : tensor<4x8xq4_2> = gguf \"w\"",
     {"t.loom:5:26:", "expected an element type", "found 'q4_2'"}},
    {"bad_dim_in_type", 5, "  weight @w : tensor<4xbxq4_0> = gguf \"w\"", {"t.loom:5:24:", "expected a dimension", "'b'"}},
    {"unterminated_type", 9, "    %y = matmul %h, @w : tensor<Tx4xf32", {"t.loom:9:32:", "unterminated type"}},
    {"duplicate_weight", 5, "  weight @n : tensor<4x8xq4_0> = gguf \"w\"", {"t.loom:5:3:", "weight @n is declared twice"}},
    {"duplicate_dim", 2, "  dim T in [1, 16]\n  dim T in [1, 4]", {"t.loom:3:3:", "dim T is declared twice"}},
    {"dim_bounds", 2, "  dim T in [16, 1]", {"dim T: bounds [16, 1]"}},
    {"lower_case_dim", 2, "  dim t in [1, 16]", {"t.loom:2:7:", "dim name 't' must be upper case"}},
    {"missing_required_attr", 8, "    %h = rms_norm %x, @n : tensor<Tx8xf32>", {"t.loom:8:", "missing attribute 'eps'"}},
    {"unknown_attr", 8, "    %h = rms_norm %x, @n {eps = 1e-05, epsilon = 1.0} : tensor<Tx8xf32>",
     {"t.loom:8:", "unknown attribute 'epsilon'", "rms_norm takes: eps"}},
    {"duplicate_attr", 8, "    %h = rms_norm %x, @n {eps = 1e-05, eps = 1e-06} : tensor<Tx8xf32>",
     {"t.loom:8:40:", "attribute 'eps' is given twice"}},
    {"weight_where_value", 9, "    %y = matmul @n, @w : tensor<Tx4xf32>", {"t.loom:9:", "operand 1 must be a value"}},
    {"value_where_weight", 9, "    %y = matmul %h, %x : tensor<Tx4xf32>", {"t.loom:9:", "operand 2 must be a weight"}},
    {"undeclared_weight", 9, "    %y = matmul %h, @nope : tensor<Tx4xf32>", {"t.loom:9:", "@nope is not a declared weight"}},
    {"norm_does_not_divide", 4, "  weight @n : tensor<3xf32> = gguf \"n\"",
     {"t.loom:8:", "does not divide the row width 8"}},
    {"norm_weight_quantized", 4, "  weight @n : tensor<8xq8_0> = gguf \"n\"", {"t.loom:8:", "must be f32, f16 or bf16"}},
    {"bias_wrong_length", 9, "    %y = matmul %h, @w : tensor<Tx4xf32>\n    %z = add %y, @n : tensor<Tx4xf32>",
     {"t.loom:10:", "@n has 8 elements but the rows of %y have 4"}},
    {"add_shape_mismatch", 9, "    %y = matmul %h, @w : tensor<Tx4xf32>\n    %z = add %y, %h : tensor<Tx4xf32>",
     {"t.loom:10:", "operand shapes tensor<Tx4xf32> and tensor<Tx8xf32> do not match"}},
    {"slice_out_of_bounds", 8, after8("    %s = slice %h {start = 6, size = 4} : tensor<Tx4xf32>"),
     {"t.loom:9:", "outside the row width 8"}},
    {"embed_ids_not_i32", 7, "    %x = embed @emb, %tok : tensor<Tx8xf32>\n    %x2 = embed @emb, %x : tensor<Tx8xf32>",
     {"t.loom:8:", "%x (token ids) must be [rows] i32"}},
    {"attention_heads", 8,
     after8("    %a = attention %h, %h, %h, %pos {layer = 0, n_head = 4, n_kv_head = 2, head_dim = 4, value_dim = 4, "
            "scale = 0.5} : tensor<Tx16xf32>"),
     {"t.loom:9:", "%h has width 8 but 4 x 4 = 16 (n_head x head_dim)"}},
    {"attention_gqa", 8,
     after8("    %a = attention %h, %h, %h, %pos {layer = 0, n_head = 3, n_kv_head = 2, head_dim = 4, value_dim = 4, "
            "scale = 0.5} : tensor<Tx12xf32>"),
     {"t.loom:9:", "n_head 3 is not a multiple of n_kv_head 2"}},
    {"kv_layer_gap", 8, after8("    %a = attention %h, %h, %h, %pos {layer = 1, n_head = 2, n_kv_head = 2, head_dim = 4, "
                               "value_dim = 4, scale = 0.5} : tensor<Tx8xf32>"),
     {"func @step: no attention op uses KV layer 0"}},
    {"kv_layer_geometry", 8, after8(kAttn + "\n    %a2 = attention %h, %h, %h, %pos {layer = 0, n_head = 4, "
                                    "n_kv_head = 4, head_dim = 2, value_dim = 2, scale = 0.5} : tensor<Tx8xf32>"),
     {"t.loom:10:", "KV layer 0 is also used by %a with n_kv_head = 2, here 4"}},
    {"return_undefined", 10, "    return %nope", {"func @step: return %nope is not defined"}},
    {"return_type_mismatch", 6, "  func @step(%tok: tensor<Txi32>, %pos: tensor<Txi32>) -> tensor<Tx8xf32> {",
     {"return %y is tensor<Tx4xf32> but the function declares tensor<Tx8xf32>"}},
    {"return_count", 10, "    return %y, %h", {"returns 2 values but declares 1 result types"}},
    {"missing_return", 10, "", {"t.loom:10:3:", "expected an op (%name = ...) or 'return', found '}'"}},
    {"unexpected_character", 9, "    %y = matmul %h, @w # : tensor<Tx4xf32>", {"t.loom:9:24:", "unexpected character '#'"}},
    {"glob_in_weight_name", 5, "  weight @w* : tensor<4x8xq4_0> = gguf \"w\"", {"t.loom:5:10:", "only allowed in schedule"}},
    {"missing_module", 1, "", {"t.loom:1:3:", "expected 'module', found identifier 'dim'"}},
    {"junk_at_top_level", 11, "  }\n  42", {"t.loom:12:3:", "expected 'dim', 'weight', 'func', 'schedule'", "number 42"}},
    {"schedule_unknown_op", 11, "  }\n  schedule { matmull(@w) = {kernel = \"x\"} }", {"schedule: unknown op 'matmull'"}},
    {"schedule_twice_set", 11, "  }\n  schedule { threads = 2, threads = 4 }", {"option 'threads' is set twice"}},
    {"schedule_missing_value", 11, "  }\n  schedule { threads = }",
     {"t.loom:12:24:", "expected an attribute value", "found '}'"}},
    // What a backend would refuse or run into garbage, the verifier refuses first.
    {"embed_of_positions", 7, "    %x = embed @emb, %pos : tensor<Tx8xf32>",
     {"t.loom:7:", "operand 2 is %pos, the step's positions"}},
    {"attention_fed_token_ids", 8, after8("    %a = attention %h, %h, %h, %tok {layer = 0, n_head = 2, n_kv_head = 2, "
                                          "head_dim = 4, value_dim = 4, scale = 0.5} : tensor<Tx8xf32>"),
     {"t.loom:9:", "operand 4 is %tok, the step's token ids"}},
    {"empty_step", 2, "  dim T in [0, 0]", {"parameter %tok has rows T", "at least one token"}},
    {"two_weights_one_tensor", 5, "  weight @w : tensor<4x8xq4_0> = gguf \"n\"",
     {"weight @w: GGUF tensor \"n\" is already bound to @n"}},
    {"step_three_params", 6,
     "  func @step(%tok: tensor<Txi32>, %pos: tensor<Txi32>, %z: tensor<Txi32>) -> tensor<Tx4xf32> {",
     {"func @step must take (%tok, %pos), has 3 parameters"}},
    {"bad_list", 8, "    %h = rms_norm %x, @n {eps = [1, 2.5]} : tensor<Tx8xf32>",
     {"t.loom:8:37:", "expected an integer in the list", "number 2.5"}},
};

class Malformed : public testing::TestWithParam<Case> {};

TEST_P(Malformed, FailsWithLocatedMessage) {
  const Case& c = GetParam();
  const std::string text = program(c);
  std::string message;
  try {
    ir::verify(ir::parse(text, "t.loom"));
  } catch (const loom::Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "accepted:\n" << text;
  for (const auto& want : c.expect) EXPECT_NE(message.find(want), std::string::npos) << "message: " << message;
}

INSTANTIATE_TEST_SUITE_P(Ir, Malformed, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(Malformed, BaseProgramIsValid) {
  std::string text;
  for (const auto& l : kBase) text += l + "\n";
  EXPECT_NO_THROW(ir::verify(ir::parse(text, "t.loom")));
}

}  // namespace
