// Shape rules: the result type of every op from its operands, under symbolic dims. Activations
// are [rows x width] f32 with a static width (rows is usually the symbolic T); token ids and
// positions are [rows] i32. The rules mirror the table in ir/ops.h.
#include <cmath>

#include "common/error.h"
#include "ir/ops.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace ir {
namespace {

std::string dim_text(const Dim& d) { return d.is_static() ? std::to_string(d.value) : d.sym; }

bool is_float_elem(Elem e) { return e == Elem::f32 || e == Elem::f16 || e == Elem::bf16; }

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) loom::fail("{} overflows a 64-bit integer", what);
  return r;
}

class Rules {
 public:
  Rules(const Module& m, const Op& op, const TypeLookup& lookup) : m_(m), op_(op), lookup_(lookup) {}

  Type infer() {
    const OpInfo* info = find_op(op_.opcode);
    if (!info) loom::fail("unknown op '{}'", op_.opcode);
    check_operands(*info);
    check_attrs(*info);
    const std::string& c = op_.opcode;
    if (c == "embed") return embed();
    if (c == "rms_norm") return rms_norm();
    if (c == "matmul") return matmul();
    if (c == "add" || c == "mul") return binary();
    if (c == "scale" || c == "softcap") return unary();
    if (c == "swiglu" || c == "geglu") return gated();
    if (c == "slice") return slice();
    if (c == "rope") return rope();
    if (c == "attention") return attention();
    loom::fail("op '{}' has no shape rule", c);  // a new OpInfo entry without a rule here
  }

 private:
  void check_operands(const OpInfo& info) {
    const int n = int(op_.operands.size());
    if (n < info.min_operands || n > info.max_operands) {
      if (info.min_operands == info.max_operands)
        loom::fail("takes {} operands, has {}", info.min_operands, n);
      loom::fail("takes {} to {} operands, has {}", info.min_operands, info.max_operands, n);
    }
    for (int i = 0; i < n; ++i) {
      const Operand& o = op_.operands[i];
      const OperandKind k = info.operand_kinds[i];
      if (k == OperandKind::value && o.kind != Operand::Kind::value)
        loom::fail("operand {} must be a value (%name), found @{}", i + 1, o.name);
      if (k == OperandKind::weight && o.kind != Operand::Kind::weight)
        loom::fail("operand {} must be a weight (@name), found %{}", i + 1, o.name);
      if (o.kind == Operand::Kind::weight && !m_.find_weight(o.name))
        loom::fail("@{} is not a declared weight", o.name);
      if (o.kind == Operand::Kind::value && !lookup_(o.name)) loom::fail("%{} is not defined", o.name);
    }
  }

  void check_attrs(const OpInfo& info) {
    for (const auto& a : op_.attrs) {
      const AttrSpec* s = find_attr_spec(info, a.name);
      if (!s) {
        std::string known;
        for (const auto& sp : info.attr_specs) known += (known.empty() ? "" : ", ") + std::string(sp.name);
        loom::fail("unknown attribute '{}' ({} takes: {})", a.name, op_.opcode, known.empty() ? "none" : known);
      }
      bool ok = false;
      switch (s->kind) {
        case AttrKind::integer: ok = std::holds_alternative<int64_t>(a.value); break;
        case AttrKind::number:
          ok = std::holds_alternative<int64_t>(a.value) ||
               (std::holds_alternative<double>(a.value) && std::isfinite(std::get<double>(a.value)));
          break;
        case AttrKind::string: ok = std::holds_alternative<std::string>(a.value); break;
        case AttrKind::boolean: ok = std::holds_alternative<bool>(a.value); break;
        case AttrKind::int_list: ok = std::holds_alternative<std::vector<int64_t>>(a.value); break;
      }
      if (!ok)
        loom::fail("attribute '{}' must be {}, found {}", a.name, attr_kind_name(s->kind), print_attr_value(a.value));
    }
    for (const auto& s : info.attr_specs)
      if (s.required && !find_attr(op_.attrs, s.name)) loom::fail("missing attribute '{}'", s.name);
  }

  const Type& value(size_t i) const { return *lookup_(op_.operands[i].name); }
  const Weight& weight(size_t i) const { return *m_.find_weight(op_.operands[i].name); }
  std::string name(size_t i) const {
    const Operand& o = op_.operands[i];
    return (o.kind == Operand::Kind::value ? "%" : "@") + o.name;
  }

  // [rows x width] f32 with a static width.
  const Type& activation(size_t i) const {
    const Type& t = value(i);
    if (t.shape.size() != 2 || t.elem != Elem::f32 || !t.shape[1].is_static())
      loom::fail("{} must be a [rows x width] f32 activation with a static width, is {}", name(i), print_type(t));
    return t;
  }
  // [rows] i32: token ids or positions.
  const Type& ids(size_t i, std::string_view what) const {
    const Type& t = value(i);
    if (t.shape.size() != 1 || t.elem != Elem::i32)
      loom::fail("{} ({}) must be [rows] i32, is {}", name(i), what, print_type(t));
    return t;
  }
  void same_rows(const Dim& a, const Dim& b, size_t i) const {
    if (!(a == b)) loom::fail("{} has {} rows, the op works on {}", name(i), dim_text(b), dim_text(a));
  }
  const Weight& vector_weight(size_t i, std::string_view what) const {
    const Weight& w = weight(i);
    if (w.type.shape.size() != 1 || !w.type.shape[0].is_static())
      loom::fail("{} ({}) must be a 1-D weight, is {}", name(i), what, print_type(w.type));
    if (!is_float_elem(w.type.elem))
      loom::fail("{} ({}) must be f32, f16 or bf16, is {}", name(i), what, elem_name(w.type.elem));
    return w;
  }
  const Weight& matrix_weight(size_t i) const {
    const Weight& w = weight(i);
    if (w.type.shape.size() != 2 || !w.type.shape[0].is_static() || !w.type.shape[1].is_static())
      loom::fail("{} must be a 2-D weight, is {}", name(i), print_type(w.type));
    if (w.type.elem == Elem::i32) loom::fail("{} must be a float or quantized weight, is i32", name(i));
    return w;
  }
  int64_t positive(std::string_view attr) const {
    const int64_t v = attr_int(op_.attrs, attr);
    if (v <= 0) loom::fail("attribute '{}' must be > 0, is {}", attr, v);
    return v;
  }
  static Type rows_by(const Dim& rows, int64_t width) { return {{rows, Dim::of(width)}, Elem::f32}; }

  Type embed() {
    const Weight& table = matrix_weight(0);
    const Type& tok = ids(1, "token ids");
    return {{tok.shape[0], table.type.shape[1]}, Elem::f32};
  }

  Type rms_norm() {
    const Type& x = activation(0);
    const Weight& w = vector_weight(1, "norm weight");
    const int64_t g = w.type.shape[0].value, d = x.shape[1].value;
    if (g <= 0 || d % g != 0) loom::fail("norm weight @{} has {} elements, which does not divide the row width {}",
                                         w.name, g, d);
    if (!(attr_float(op_.attrs, "eps") >= 0)) loom::fail("attribute 'eps' must be >= 0");
    return x;
  }

  Type matmul() {
    const Type& x = activation(0);
    const Weight& w = matrix_weight(1);
    if (!(w.type.shape[1] == x.shape[1]))
      loom::fail("%{} is [{} x {}] but @{} is [{} x {}]: the inner dimensions ({} and {}) differ", op_.operands[0].name,
                 dim_text(x.shape[0]), dim_text(x.shape[1]), w.name, dim_text(w.type.shape[0]),
                 dim_text(w.type.shape[1]), dim_text(x.shape[1]), dim_text(w.type.shape[1]));
    return {{x.shape[0], w.type.shape[0]}, Elem::f32};
  }

  // The second operand: a value of a's shape or one row of it, or a 1-D weight (a bias).
  Type binary() {
    const Type& a = activation(0);
    if (op_.operands[1].kind == Operand::Kind::weight) {
      const Weight& b = vector_weight(1, "row operand");
      if (!(b.type.shape[0] == a.shape[1]))
        loom::fail("@{} has {} elements but the rows of %{} have {}", b.name, dim_text(b.type.shape[0]),
                   op_.operands[0].name, dim_text(a.shape[1]));
      return a;
    }
    const Type& b = activation(1);
    if (!(b.shape[1] == a.shape[1]) || !(b.shape[0] == a.shape[0] || b.shape[0] == Dim::of(1)))
      loom::fail("operand shapes {} and {} do not match (the second must have the first's shape or one row of it)",
                 print_type(a), print_type(b));
    return a;
  }

  Type unary() {
    const Type& x = activation(0);
    if (op_.opcode == "softcap" && !(attr_float(op_.attrs, "cap") > 0)) loom::fail("attribute 'cap' must be > 0");
    return x;
  }

  Type gated() {
    const Type& g = activation(0);
    const Type& u = activation(1);
    if (!(g == u)) loom::fail("gate {} and up {} must have the same shape", print_type(g), print_type(u));
    return g;
  }

  Type slice() {
    const Type& x = activation(0);
    const int64_t start = attr_int(op_.attrs, "start"), size = attr_int(op_.attrs, "size");
    const int64_t width = x.shape[1].value;
    if (start < 0 || size <= 0 || start > width || size > width - start)
      loom::fail("slice [{}, {} + {}) is outside the row width {}", start, start, size, width);
    return rows_by(x.shape[0], size);
  }

  Type rope() {
    const Type& x = activation(0);
    const Type& pos = ids(1, "positions");
    same_rows(x.shape[0], pos.shape[0], 1);
    const int64_t head_dim = positive("head_dim"), n_rot = positive("n_rot");
    if (x.shape[1].value % head_dim != 0)
      loom::fail("head_dim {} does not divide the width {} of %{}", head_dim, x.shape[1].value, op_.operands[0].name);
    if (n_rot > head_dim || n_rot % 2 != 0)
      loom::fail("n_rot {} must be even and at most head_dim {}", n_rot, head_dim);
    if (!(attr_float(op_.attrs, "base") > 0)) loom::fail("attribute 'base' must be > 0");
    if (!(attr_float(op_.attrs, "freq_scale", 1.0) > 0)) loom::fail("attribute 'freq_scale' must be > 0");
    const std::string mode = attr_string(op_.attrs, "mode");
    if (mode != "normal" && mode != "neox") loom::fail("attribute 'mode' must be \"normal\" or \"neox\", is \"{}\"", mode);
    if (op_.operands.size() == 3) {
      const Weight& f = vector_weight(2, "frequency factors");
      if (!(f.type.shape[0] == Dim::of(n_rot / 2)))
        loom::fail("@{} has {} frequency factors, n_rot {} needs {}", f.name, dim_text(f.type.shape[0]), n_rot, n_rot / 2);
    }
    return x;
  }

  Type attention() {
    const Type& q = activation(0);
    const Type& k = activation(1);
    const Type& v = activation(2);
    const Type& pos = ids(3, "positions");
    same_rows(q.shape[0], k.shape[0], 1);
    same_rows(q.shape[0], v.shape[0], 2);
    same_rows(q.shape[0], pos.shape[0], 3);
    if (attr_int(op_.attrs, "layer") < 0) loom::fail("attribute 'layer' must be >= 0");
    const int64_t n_head = positive("n_head"), n_kv = positive("n_kv_head");
    const int64_t hd = positive("head_dim"), vd = positive("value_dim");
    if (n_head % n_kv != 0) loom::fail("n_head {} is not a multiple of n_kv_head {}", n_head, n_kv);
    if (attr_int(op_.attrs, "window", 0) < 0) loom::fail("attribute 'window' must be >= 0");
    if (!(attr_float(op_.attrs, "softcap", 0.0) >= 0)) loom::fail("attribute 'softcap' must be >= 0");
    auto expect_width = [&](size_t i, int64_t heads, int64_t dim, std::string_view what) {
      const int64_t want = checked_mul(heads, dim, what);
      const int64_t have = value(i).shape[1].value;
      if (have != want)
        loom::fail("{} has width {} but {} x {} = {} ({})", name(i), have, heads, dim, want, what);
    };
    expect_width(0, n_head, hd, "n_head x head_dim");
    expect_width(1, n_kv, hd, "n_kv_head x head_dim");
    expect_width(2, n_kv, vd, "n_kv_head x value_dim");
    return rows_by(q.shape[0], checked_mul(n_head, vd, "n_head x value_dim"));
  }

  const Module& m_;
  const Op& op_;
  const TypeLookup& lookup_;
};

}  // namespace

Type infer_type(const Module& m, const Func& f, const Op& op, const TypeLookup& lookup) {
  return Rules(m, op, lookup).infer();
}

}  // namespace ir
