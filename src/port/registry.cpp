// The architecture table: one line per family. Each porter lives in <arch>.cpp.
#include <algorithm>

#include "common/error.h"
#include "port/port.h"
#include "port/program.h"

namespace port {

// One line per architecture: NAME is general.architecture, and NAME.cpp defines port_NAME.
#define LOOM_PORT_ARCHITECTURES(X) \
  X(gemma3)                        \
  X(llama)                         \
  X(phi3)                          \
  X(qwen2)                         \
  X(qwen3)

#define LOOM_PORT_DECLARE(arch) ir::Module port_##arch(const gguf::File&);
LOOM_PORT_ARCHITECTURES(LOOM_PORT_DECLARE)

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> table = [] {
#define LOOM_PORT_ENTRY(arch) {#arch, port_##arch},
    std::vector<Architecture> t = {LOOM_PORT_ARCHITECTURES(LOOM_PORT_ENTRY)};
    std::sort(t.begin(), t.end(), [](auto& a, auto& b) { return std::string_view(a.name) < b.name; });
    return t;
  }();
  return table;
}

std::string supported_list() {
  std::string s;
  for (const auto& a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

ir::Module port(const gguf::File& f, const PortOptions& opts) {
  const std::string arch = f.architecture();
  for (const auto& a : architectures())
    if (arch == a.name) {
      ir::Module m = a.port(f);
      if (opts.n_ctx < 0) loom::fail("{}: context {} is negative", f.path(), opts.n_ctx);
      if (opts.n_ctx > 0) set_context(m, opts.n_ctx);
      record_sha256(m, opts.record_sha256 ? f.sha256() : "");
      return m;
    }
  loom::fail("{}: unsupported architecture '{}' (supported: {})", f.path(), arch, supported_list());
}

}  // namespace port
