// Module-level checks around the per-op shape rules (shape_rules.cpp): declarations, scopes,
// declared vs inferred types, returns, KV-cache layers, and the schedule.
#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "ir/ops.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace ir {

bool is_valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  return true;
}

bool is_valid_dim_name(std::string_view s) {
  if (s.empty() || !(s[0] >= 'A' && s[0] <= 'Z')) return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool is_valid_attr_name(std::string_view s) {
  if (s.empty() || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
  return is_valid_name(s);
}

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative match with one backtrack point: linear enough for selectors, no recursion depth.
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

namespace {

class Verifier {
 public:
  explicit Verifier(const Module& m) : m_(m) {}

  void run() {
    if (!is_valid_name(m_.name)) fail_here(fmt::format("module name '{}' is not a valid name", m_.name));
    check_attrs(m_.attrs, "module attribute");
    std::set<std::string, std::less<>> seen;
    for (const auto& d : m_.dims) {
      const std::string where = "dim " + d.name;
      if (!is_valid_dim_name(d.name)) fail_here(where + ": dim names are upper case ([A-Z][A-Z0-9_]*)");
      if (!seen.insert(d.name).second) fail_here(where + " is declared twice");
      if (d.lo < 0 || d.lo > d.hi) fail_here(fmt::format("{}: bounds [{}, {}] are not 0 <= lo <= hi", where, d.lo, d.hi));
    }
    seen.clear();
    std::map<std::string_view, std::string_view> tensors;  // GGUF name -> weight
    for (const auto& w : m_.weights) {
      const std::string where = "weight @" + w.name;
      if (!is_valid_name(w.name)) fail_here(where + ": not a valid name");
      if (!seen.insert(w.name).second) fail_here(where + " is declared twice");
      if (w.type.shape.empty()) fail_here(where + ": a weight has at least one dimension");
      for (const auto& d : w.type.shape)
        if (!d.is_static() || d.value <= 0)
          fail_here(fmt::format("{}: extents must be static and > 0, type is {}", where, print_type(w.type)));
      if (w.type.elem == Elem::i32) fail_here(where + ": weights are float or quantized, not i32");
      if (w.gguf_name.empty()) fail_here(where + ": empty GGUF tensor name");
      // One tensor, one weight: a program that reads a tensor twice names it once (tied
      // embeddings use @tok_embd in the output matmul), so bindings stay one-to-one.
      if (auto [it, fresh] = tensors.emplace(w.gguf_name, w.name); !fresh)
        fail_here(fmt::format("{}: GGUF tensor \"{}\" is already bound to @{}", where, w.gguf_name, it->second));
    }
    seen.clear();
    for (const auto& f : m_.funcs) {
      if (!is_valid_name(f.name)) fail_here(fmt::format("func @{}: not a valid name", f.name));
      if (!seen.insert(f.name).second) fail_here(fmt::format("func @{} is defined twice", f.name));
      if (f.name == "step") step_signature(f);
      func(f);
    }
    schedule();
  }

 private:
  std::string prefix(int line) const {
    if (line > 0) return m_.source.empty() ? fmt::format("line {}: ", line) : fmt::format("{}:{}: ", m_.source, line);
    return m_.source.empty() ? "" : m_.source + ": ";
  }
  [[noreturn]] void fail_here(const std::string& msg, int line = 0) const { loom::fail("{}{}", prefix(line), msg); }

  void check_attrs(const Attrs& as, std::string_view what, int line = 0) const {
    std::set<std::string_view> names;
    for (const auto& a : as) {
      if (!is_valid_attr_name(a.name)) fail_here(fmt::format("{} '{}': not a valid name", what, a.name), line);
      if (!names.insert(a.name).second) fail_here(fmt::format("{} '{}' is given twice", what, a.name), line);
      if (auto* d = std::get_if<double>(&a.value); d && !std::isfinite(*d))
        fail_here(fmt::format("{} '{}' is not a finite number", what, a.name), line);
    }
  }

  void check_type(const Type& t, const std::string& where, int line) const {
    for (const auto& d : t.shape) {
      if (d.is_static()) {
        if (d.value < 0) fail_here(fmt::format("{}: negative extent in {}", where, print_type(t)), line);
        continue;
      }
      if (!m_.find_dim(d.sym)) fail_here(fmt::format("{}: dim {} is not declared (add `dim {} in [lo, hi]`)",
                                                     where, d.sym, d.sym), line);
    }
  }

  void func(const Func& f) {
    const std::string fname = "func @" + f.name;
    std::map<std::string, const Type*, std::less<>> scope;
    for (const auto& p : f.params) {
      if (!is_valid_name(p.name)) fail_here(fmt::format("{}: parameter %{} is not a valid name", fname, p.name));
      check_type(p.type, fmt::format("{}: parameter %{}", fname, p.name), 0);
      if (!scope.emplace(p.name, &p.type).second)
        fail_here(fmt::format("{}: parameter %{} is declared twice", fname, p.name));
    }
    for (size_t i = 0; i < f.result_types.size(); ++i)
      check_type(f.result_types[i], fmt::format("{}: result {}", fname, i + 1), 0);
    // Names defined anywhere in the body, to tell "used before defined" from "never defined".
    std::set<std::string_view> later;
    for (const auto& op : f.body) later.insert(op.result);
    std::map<int64_t, const Op*> layers;
    const TypeLookup lookup = [&](std::string_view n) -> const Type* {
      auto it = scope.find(n);
      return it == scope.end() ? nullptr : it->second;
    };
    for (const auto& op : f.body) {
      const std::string where = fmt::format("op %{} ({})", op.result, op.opcode);
      auto fail_op = [&](const std::string& msg) { fail_here(where + ": " + msg, op.line); };
      if (!is_valid_name(op.result)) fail_op("result name is not a valid name");
      if (!is_valid_attr_name(op.opcode)) fail_op("opcode is not a valid name");
      check_attrs(op.attrs, where + ": attribute", op.line);
      for (const auto& o : op.operands) {
        if (!is_valid_name(o.name)) fail_op(fmt::format("operand '{}' is not a valid name", o.name));
        if (o.kind == Operand::Kind::value && !scope.count(o.name) && later.count(o.name))
          fail_op(fmt::format("%{} is used before it is defined", o.name));
      }
      check_type(op.type, where, op.line);
      Type inferred;
      try {
        inferred = infer_type(m_, f, op, lookup);
      } catch (const loom::Error& e) {
        fail_op(e.what());
      }
      if (!(inferred == op.type))
        fail_op(fmt::format("declared type {} but the operands give {}", print_type(op.type), print_type(inferred)));
      if (op.opcode == "attention") kv_layer(op, layers, fail_op);
      if (!scope.emplace(op.result, &op.type).second) fail_op(fmt::format("%{} is defined twice", op.result));
    }
    for (size_t l = 0; l < layers.size(); ++l)
      if (!layers.count(int64_t(l)))
        fail_here(fmt::format("{}: no attention op uses KV layer {} (layers are numbered 0..{})", fname, l,
                              layers.size() - 1));
    if (f.results.size() != f.result_types.size())
      fail_here(fmt::format("{}: returns {} values but declares {} result types", fname, f.results.size(),
                            f.result_types.size()));
    for (size_t i = 0; i < f.results.size(); ++i) {
      auto it = scope.find(f.results[i]);
      if (it == scope.end()) fail_here(fmt::format("{}: return %{} is not defined", fname, f.results[i]));
      if (!(*it->second == f.result_types[i]))
        fail_here(fmt::format("{}: return %{} is {} but the function declares {}", fname, f.results[i],
                              print_type(*it->second), print_type(f.result_types[i])));
    }
  }

  // The contract every backend runs @step under: (%tok: tensor<Rxi32>, %pos: tensor<Rxi32>) ->
  // logits, at least one row per step; token ids feed only embed, positions only rope and
  // attention (an embed of positions or an attention fed token ids would run, into garbage).
  void step_signature(const Func& f) const {
    const std::string fname = "func @step";
    if (f.params.size() != 2)
      fail_here(fmt::format("{} must take (%tok, %pos), has {} parameters", fname, f.params.size()));
    for (const auto& p : f.params) {
      if (p.type.elem != Elem::i32 || p.type.shape.size() != 1)
        fail_here(fmt::format("{}: parameter %{} must be a 1-D i32 tensor, is {}", fname, p.name, print_type(p.type)));
      const Dim& d = p.type.shape[0];
      const SymDim* sd = d.is_static() ? nullptr : m_.find_dim(d.sym);
      if (d.is_static() ? d.value < 1 : (sd && sd->lo < 1))
        fail_here(fmt::format("{}: parameter %{} has rows {}, but a step holds at least one token (dim {} in [{}, {}])",
                              fname, p.name, d.is_static() ? std::to_string(d.value) : d.sym, d.sym,
                              sd ? sd->lo : 0, sd ? sd->hi : 0));
    }
    if (f.result_types.size() != 1)
      fail_here(fmt::format("{} must return the logits only, declares {} results", fname, f.result_types.size()));
    const std::string& tok = f.params[0].name;
    const std::string& pos = f.params[1].name;
    for (const auto& op : f.body)
      for (size_t i = 0; i < op.operands.size(); ++i) {
        const Operand& o = op.operands[i];
        if (o.kind != Operand::Kind::value || (o.name != tok && o.name != pos)) continue;
        const bool ok = o.name == tok ? op.opcode == "embed" && i == 1
                                      : (op.opcode == "rope" && i == 1) || (op.opcode == "attention" && i == 3);
        if (!ok)
          fail_here(fmt::format("op %{} ({}): operand {} is %{}, the step's {}, which only {} read", op.result,
                                op.opcode, i + 1, o.name, o.name == tok ? "token ids" : "positions",
                                o.name == tok ? "embed's index operand may" : "rope's and attention's positions"),
                    op.line);
      }
  }

  // Two attention ops may share a KV layer (cache sharing) only with the same geometry.
  template <typename Fail>
  void kv_layer(const Op& op, std::map<int64_t, const Op*>& layers, Fail&& fail_op) const {
    const int64_t l = attr_int(op.attrs, "layer");
    auto [it, fresh] = layers.emplace(l, &op);
    if (fresh) return;
    for (const char* a : {"n_kv_head", "head_dim", "value_dim"})
      if (attr_int(op.attrs, a) != attr_int(it->second->attrs, a))
        fail_op(fmt::format("KV layer {} is also used by %{} with {} = {}, here {}", l, it->second->result, a,
                            attr_int(it->second->attrs, a), attr_int(op.attrs, a)));
  }

  void schedule() const {
    std::set<std::string> globals;
    for (const auto& e : m_.schedule) {
      check_attrs(e.settings, "schedule setting");
      if (e.opcode.empty()) {
        if (!e.selector.empty()) fail_here(fmt::format("schedule: selector @{} without an opcode", e.selector));
        if (e.settings.size() != 1) fail_here("schedule: a global entry holds exactly one setting");
        if (!globals.insert(e.settings[0].name).second)
          fail_here(fmt::format("schedule: option '{}' is set twice", e.settings[0].name));
        continue;
      }
      if (!find_op(e.opcode)) fail_here(fmt::format("schedule: unknown op '{}'", e.opcode));
      for (char c : e.selector)
        if (!(is_valid_name(std::string_view(&c, 1)) || c == '*' || c == '?'))
          fail_here(fmt::format("schedule: selector @{} has a character other than [A-Za-z0-9_.*?]", e.selector));
    }
  }

  const Module& m_;
};

}  // namespace

void verify(const Module& m) { Verifier(m).run(); }

std::vector<std::string> schedule_warnings(const Module& m) {
  std::vector<std::string> out;
  for (const auto& e : m.schedule) {
    if (e.opcode.empty() || e.selector.empty()) continue;
    bool hit = false;
    for (const auto& f : m.funcs)
      for (const auto& op : f.body)
        if (op.opcode == e.opcode)
          for (const auto& o : op.operands) hit = hit || (o.kind == Operand::Kind::weight && glob_match(e.selector, o.name));
    if (!hit) out.push_back(fmt::format("schedule: {}(@{}) matches no {} op's weight", e.opcode, e.selector, e.opcode));
  }
  return out;
}

}  // namespace ir
