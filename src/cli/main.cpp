#include <algorithm>
#include <cstdio>

#include "cli/verb.h"
#include "common/error.h"

namespace loom::cli {
std::vector<VerbEntry>& verbs() {
  static std::vector<VerbEntry> v;
  return v;
}
}  // namespace loom::cli

int main(int argc, char** argv) {
  // The banner names only verbs that exist; `loom --help` lists them all.
  CLI::App app{"loom: port quantized GGUF models to .loom model programs, check them, and run, chat with, "
               "serve and benchmark them on the CPU or an NVIDIA GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("loom ") + LOOM_VERSION);
  auto& vs = loom::cli::verbs();
  std::sort(vs.begin(), vs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& v : vs) v.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
