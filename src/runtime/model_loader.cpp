#include "runtime/model_loader.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "port/port.h"

namespace fs = std::filesystem;

namespace loom::runtime {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Implements the search order documented in model_loader.h.
std::string find_weights(const ir::Module& m, const fs::path& program, const std::string& override_path) {
  const std::string want = ir::attr_string(m.attrs, "gguf.sha256");
  const fs::path dir = program.parent_path().empty() ? fs::path(".") : program.parent_path();
  std::vector<fs::path> candidates;
  if (!override_path.empty()) {
    candidates.push_back(override_path);
  } else {
    if (auto f = ir::attr_string(m.attrs, "gguf.file"); !f.empty()) candidates.push_back(dir / f);
    candidates.push_back(fs::path(program).replace_extension(".gguf"));
  }
  for (const auto& c : candidates)
    if (fs::exists(c)) return c.string();
  if (!override_path.empty()) loom::fail("--gguf {}: no such file", override_path);
  if (want.empty())
    loom::fail("{}: no weights found (no {} next to it, no gguf.sha256 to search by); give --gguf FILE",
               program.string(), fs::path(program).replace_extension(".gguf").string());
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf" && gguf::File::open(e.path().string()).sha256() == want) return e.path().string();
  loom::fail("{}: no .gguf in {} has sha256 {}; give --gguf FILE", program.string(), dir.string(), want);
}

}  // namespace

LoadedModel load_model(const std::string& path, const std::string& gguf_override, int64_t min_ctx) {
  LoadedModel lm;
  if (ends_with(path, ".loom")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) loom::fail("cannot open {}", path);
    std::stringstream ss;
    ss << in.rdbuf();
    lm.module = ir::parse(ss.str(), path);
    ir::verify(lm.module);
    const std::string weights = find_weights(lm.module, path, gguf_override);
    lm.file = std::make_unique<gguf::File>(gguf::File::open(weights));
    const std::string want = ir::attr_string(lm.module.attrs, "gguf.sha256");
    if (!want.empty() && lm.file->sha256() != want)
      loom::fail("{} was ported from a GGUF with sha256 {}, but {} has {}", path, want, weights, lm.file->sha256());
    lm.origin = "parsed from " + path + ", weights " + weights;
  } else {
    if (!gguf_override.empty()) loom::fail("--gguf is for .loom programs; {} is already a GGUF", path);
    lm.file = std::make_unique<gguf::File>(gguf::File::open(path));
    lm.module = port::port(*lm.file, {.record_sha256 = false});  // bound to this very file
    const ir::SymDim* p = lm.module.find_dim("P");
    if (p && min_ctx > p->hi) {
      std::fprintf(stderr, "warning: %s was trained on %lld positions; ported for %lld as asked\n", path.c_str(),
                   (long long)p->hi, (long long)min_ctx);
      port::set_context(lm.module, min_ctx);
    }
    lm.origin = "ported from " + path;
  }
  return lm;
}

}  // namespace loom::runtime
