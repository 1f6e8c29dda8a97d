// Canonical printer. Column alignment is a pure function of the printed pieces (never of
// source positions), so print(parse(print(m))) reproduces print(m) byte for byte.
//
// Alignment (documented in docs/loom-language.md, "Canonical form"):
//   weights: names padded to the widest name (up to 32), types to the widest type (up to 40);
//   ops:     result names padded to the widest result (up to 16), and the ': type' column put
//            one space after the widest op whose text fits in 72 columns; wider ops get one space.
#include <algorithm>
#include <charconv>

#include "common/error.h"
#include "ir/text.h"

namespace ir {
namespace {

constexpr size_t kWeightNameCap = 32, kWeightTypeCap = 40, kResultCap = 16, kTypeColumnCap = 72;

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f)
          out += fmt::format("\\x{:02x}", u);
        else
          out += c;
    }
  }
  return out + "\"";
}

// Shortest text that reads back as the same double, and always reads back as a float.
std::string print_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf/nan never verify
  return s;
}

std::string print_attrs(const Attrs& as) {
  std::string s = "{";
  for (size_t i = 0; i < as.size(); ++i) {
    if (i) s += ", ";
    s += as[i].name;
    s += " = ";
    s += print_attr_value(as[i].value);
  }
  return s + "}";
}

std::string print_operand(const Operand& o) {
  std::string s = o.kind == Operand::Kind::value ? "%" : "@";
  return s + o.name;
}

// Everything left of the ': type' column, the result name unpadded.
std::string op_rhs(const Op& op) {
  std::string s = " = " + op.opcode;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    s += i ? ", " : " ";
    s += print_operand(op.operands[i]);
  }
  if (!op.attrs.empty()) {
    s += ' ';
    s += print_attrs(op.attrs);
  }
  return s;
}

void print_func(std::string& out, const Func& f) {
  out += "  func @" + f.name + "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    out += i ? ", %" : "%";
    out += f.params[i].name;
    out += ": ";
    out += print_type(f.params[i].type);
  }
  out += ") -> ";
  if (f.result_types.size() == 1) {
    out += print_type(f.result_types[0]);
  } else {
    out += "(";
    for (size_t i = 0; i < f.result_types.size(); ++i) {
      if (i) out += ", ";
      out += print_type(f.result_types[i]);
    }
    out += ")";
  }
  out += " {\n";
  size_t result_w = 0;
  for (const auto& op : f.body)
    if (op.result.size() + 1 <= kResultCap) result_w = std::max(result_w, op.result.size() + 1);
  std::vector<std::string> lhs;
  size_t type_col = 0;
  for (const auto& op : f.body) {
    lhs.push_back("    " + pad("%" + op.result, result_w) + op_rhs(op));
    if (lhs.back().size() <= kTypeColumnCap) type_col = std::max(type_col, lhs.back().size());
  }
  for (size_t i = 0; i < f.body.size(); ++i) out += pad(lhs[i], type_col) + " : " + print_type(f.body[i].type) + "\n";
  out += "    return";
  for (size_t i = 0; i < f.results.size(); ++i) {
    out += i ? ", %" : " %";
    out += f.results[i];
  }
  out += "\n  }\n";
}

void print_schedule(std::string& out, const std::vector<ScheduleEntry>& entries) {
  std::vector<std::string> lines;
  for (const auto& e : entries) {
    if (!e.opcode.empty()) {
      std::string s = e.opcode;
      if (!e.selector.empty()) s += "(@" + e.selector + ")";
      lines.push_back(s + " = " + print_attrs(e.settings));
    } else {
      // A global entry holds one setting; should one hold more, each prints as its own entry.
      for (const auto& a : e.settings) lines.push_back(a.name + " = " + print_attr_value(a.value));
    }
  }
  out += "  schedule {\n";
  for (size_t i = 0; i < lines.size(); ++i) out += "    " + lines[i] + (i + 1 < lines.size() ? ",\n" : "\n");
  out += "  }\n";
}

}  // namespace

std::string print_type(const Type& t) {
  std::string s = "tensor<";
  for (const auto& d : t.shape) s += (d.is_static() ? std::to_string(d.value) : d.sym) + "x";
  return s + elem_name(t.elem) + ">";
}

std::string print_attr_value(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<X, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<X, double>) return print_float(x);
        else if constexpr (std::is_same_v<X, std::string>) return quote(x);
        else {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) s += ", ";
            s += std::to_string(x[i]);
          }
          return s + "]";
        }
      },
      v);
}

std::string print(const Module& m) {
  std::string out = "module @" + m.name;
  if (!m.attrs.empty()) {
    out += ' ';
    out += print_attrs(m.attrs);
  }
  out += "\n";
  bool section = false;
  auto gap = [&] {
    if (section) out += "\n";
    section = true;
  };
  if (!m.dims.empty()) {
    gap();
    for (const auto& d : m.dims) out += fmt::format("  dim {} in [{}, {}]\n", d.name, d.lo, d.hi);
  }
  if (!m.weights.empty()) {
    gap();
    size_t name_w = 0, type_w = 0;
    for (const auto& w : m.weights) {
      if (w.name.size() + 1 <= kWeightNameCap) name_w = std::max(name_w, w.name.size() + 1);
      const size_t tw = print_type(w.type).size();
      if (tw <= kWeightTypeCap) type_w = std::max(type_w, tw);
    }
    for (const auto& w : m.weights)
      out += "  weight " + pad("@" + w.name, name_w) + " : " + pad(print_type(w.type), type_w) + " = gguf " +
             quote(w.gguf_name) + "\n";
  }
  for (const auto& f : m.funcs) {
    gap();
    print_func(out, f);
  }
  if (!m.schedule.empty()) {
    gap();
    print_schedule(out, m.schedule);
  }
  return out;
}

}  // namespace ir
