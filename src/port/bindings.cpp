// `loom check --gguf`: a program's weights against the file that is to feed them.
#include "common/error.h"
#include "port/port.h"
#include "port/program.h"

namespace port {
namespace {

std::string shape_text(const ir::Type& t) {
  std::string s;
  for (const auto& d : t.shape) s += (s.empty() ? "" : "x") + (d.is_static() ? std::to_string(d.value) : d.sym);
  return s + "x" + ir::elem_name(t.elem);
}

}  // namespace

std::vector<std::string> check_bindings(const ir::Module& m, const gguf::File& f, BindingOptions opt) {
  std::vector<std::string> problems, warnings;
  const std::string want = ir::attr_string(m.attrs, "gguf.sha256");
  if (opt.check_hash && !want.empty() && want != f.sha256()) {
    std::string msg = fmt::format("@{} was ported from a GGUF with sha256 {}, but {} has sha256 {}", m.name, want,
                                  f.path(), f.sha256());
    (opt.hash_mismatch_is_error ? problems : warnings).push_back(std::move(msg));
  }
  for (const auto& w : m.weights) {
    const gguf::TensorInfo* t = f.find_tensor(w.gguf_name);
    if (!t) {
      problems.push_back(fmt::format("weight @{}: {} has no tensor '{}'", w.name, f.path(), w.gguf_name));
      continue;
    }
    if (!elem_of(t->type)) {
      problems.push_back(fmt::format("weight @{}: tensor '{}' has type {}, which Loom programs cannot hold", w.name,
                                     w.gguf_name, gguf::type_name(t->type)));
      continue;
    }
    const ir::Type have = type_of(*t);
    if (have != w.type)
      problems.push_back(fmt::format("weight @{}: declared tensor<{}>, but tensor '{}' in {} is tensor<{}>", w.name,
                                     shape_text(w.type), w.gguf_name, f.path(), shape_text(have)));
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{} binding problem{} between @{} and {}:", problems.size(),
                                  problems.size() == 1 ? "" : "s", m.name, f.path());
    const size_t shown = std::min<size_t>(problems.size(), 20);
    for (size_t i = 0; i < shown; ++i) msg += "\n  " + problems[i];
    if (shown < problems.size()) msg += fmt::format("\n  ... and {} more", problems.size() - shown);
    throw loom::Error(msg);
  }
  return warnings;
}

}  // namespace port
