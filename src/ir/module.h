// The in-memory form of a `.loom` model program (docs/loom-language.md gives the text form).
//
// A Module holds symbolic dimensions, weights bound by GGUF tensor name, functions of SSA
// values, and a schedule that the compiler and the tuner may change without touching the
// graph. Shapes are written outermost-first (row-major, like numpy): a GGUF tensor with
// ne = [576, 49152] (ne0 contiguous) is `tensor<49152x576xq4_1>` here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ir {

// Element types: plain numeric types for activations, block-quantized types for weights.
// Names are the ones the text form uses (lower case, as ggml names them).
enum class Elem {
  f32, f16, bf16, i32,
  q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, q8_k,
};
const char* elem_name(Elem e);
std::optional<Elem> elem_from_name(std::string_view name);

// A dimension is a static extent or a reference to a module-level symbolic dim (by name).
struct Dim {
  int64_t value = 0;   // static extent when sym is empty
  std::string sym;     // symbolic: "T", "P", ...
  static Dim of(int64_t v) { return {v, {}}; }
  static Dim symbol(std::string s) { return {0, std::move(s)}; }
  bool is_static() const { return sym.empty(); }
  bool operator==(const Dim&) const = default;
};

struct Type {
  std::vector<Dim> shape;
  Elem elem = Elem::f32;
  bool operator==(const Type&) const = default;
};

// Typed attribute values. Floats print with enough digits to round-trip exactly.
using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
struct Attr {
  std::string name;
  AttrValue value;
  bool operator==(const Attr&) const = default;
};
using Attrs = std::vector<Attr>;  // insertion order is print order

const Attr* find_attr(const Attrs& attrs, std::string_view name);
// Checked accessors: throw loom::Error naming the attribute and the expected type.
int64_t attr_int(const Attrs& attrs, std::string_view name);
int64_t attr_int(const Attrs& attrs, std::string_view name, int64_t def);
double attr_float(const Attrs& attrs, std::string_view name);  // accepts ints too
double attr_float(const Attrs& attrs, std::string_view name, double def);
std::string attr_string(const Attrs& attrs, std::string_view name, std::string def = "");
bool attr_bool(const Attrs& attrs, std::string_view name, bool def);

// `dim T in [1, 8192]`
struct SymDim {
  std::string name;
  int64_t lo = 0, hi = 0;
  bool operator==(const SymDim&) const = default;
};

// `weight @blk0.wq : tensor<576x576xq4_k> = gguf "blk.0.attn_q.weight"`
struct Weight {
  std::string name;       // without '@'
  Type type;
  std::string gguf_name;  // tensor name in the GGUF file
  bool operator==(const Weight&) const = default;
};

// An operand is an SSA value (%name) or a weight (@name).
struct Operand {
  enum class Kind { value, weight } kind = Kind::value;
  std::string name;  // without the sigil
  static Operand value(std::string n) { return {Kind::value, std::move(n)}; }
  static Operand weight(std::string n) { return {Kind::weight, std::move(n)}; }
  bool operator==(const Operand&) const = default;
};

// `%q = matmul %h, @blk0.wq : tensor<Tx576xf32>` — one op per line, one result.
struct Op {
  std::string result;  // without '%'
  std::string opcode;  // see ir/ops.h for the op set and semantics
  std::vector<Operand> operands;
  Attrs attrs;
  Type type;           // the result's type
  int line = 0;        // source line when parsed, 0 when built in memory
  // Structural equality: where an op came from (line) is not part of what it computes.
  bool operator==(const Op& o) const {
    return result == o.result && opcode == o.opcode && operands == o.operands && attrs == o.attrs && type == o.type;
  }
};

struct Param {
  std::string name;  // without '%'
  Type type;
  bool operator==(const Param&) const = default;
};

struct Func {
  std::string name;  // without '@'
  std::vector<Param> params;
  std::vector<Op> body;
  std::vector<std::string> results;  // `return %a, %b`
  std::vector<Type> result_types;
  bool operator==(const Func&) const = default;
};

// `schedule { matmul(@blk*.w*) = {kernel = "q4k_gemv_v2"}, threads = 2 }`
// An entry either sets a global option (no selector) or options for the ops that match an
// opcode and a glob over weight names. The graph never depends on the schedule.
struct ScheduleEntry {
  std::string opcode;    // empty for a global entry
  std::string selector;  // glob over weight operands, e.g. "blk*.w*"; empty for global
  Attrs settings;        // for a global entry: exactly one setting
  // Where each setting's name was read (line, col), parallel to settings; empty when built in
  // memory. Not part of equality, as Op::line is not.
  std::vector<std::pair<int, int>> setting_pos;
  bool operator==(const ScheduleEntry& o) const {
    return opcode == o.opcode && selector == o.selector && settings == o.settings;
  }
};

struct Module {
  std::string name;  // without '@'
  Attrs attrs;       // arch, gguf.sha256, hyper-parameters
  std::vector<SymDim> dims;
  std::vector<Weight> weights;
  std::vector<Func> funcs;
  std::vector<ScheduleEntry> schedule;
  std::string source;  // the file it was parsed from, for messages; not part of equality

  // Structural equality: what the program computes, not where it was read from.
  bool operator==(const Module& o) const {
    return name == o.name && attrs == o.attrs && dims == o.dims && weights == o.weights && funcs == o.funcs &&
           schedule == o.schedule;
  }
  const Weight* find_weight(std::string_view name) const;
  const Func* find_func(std::string_view name) const;
  const SymDim* find_dim(std::string_view name) const;
};

}  // namespace ir
