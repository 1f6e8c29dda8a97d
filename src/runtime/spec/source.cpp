#include "runtime/spec/source.h"

#include "common/error.h"
#include "runtime/spec/draft_model.h"
#include "runtime/spec/prompt_lookup.h"

namespace loom::runtime::spec {

std::shared_ptr<const DraftSource> open_draft_source(const std::string& name, const ModelBundle& target,
                                                     const RunOptions& opts) {
  if (name.empty() || name == "none" || name == "off") return nullptr;
  if (name == "lookup") return std::make_shared<PromptLookup>();
  if (name.rfind("draft:", 0) == 0) {
    const std::string path = name.substr(6);
    if (path.empty()) loom::fail("--spec draft:PATH needs the draft model's path");
    return DraftModel::open(path, target, opts);
  }
  if (name.rfind("layers:", 0) == 0) {
    int64_t k = 0;
    try {
      size_t used = 0;
      k = std::stoll(name.substr(7), &used);
      if (used != name.size() - 7) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      loom::fail("--spec {}: layers:K needs a whole number of layers", name);
    }
    return DraftModel::derive(target, k, opts);
  }
  loom::fail("--spec {}: unknown drafter (lookup, draft:PATH, layers:K or none)", name);
}

}  // namespace loom::runtime::spec
