#include "runtime/spec/draft_model.h"

#include <algorithm>

#include "backend/registry.h"
#include "common/error.h"
#include "port/draft_program.h"

namespace loom::runtime::spec {

namespace {

EngineOptions draft_engine_options(const RunOptions& o, int32_t n_ctx) {
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.max_seqs = std::max(1, o.max_seqs);
  eo.n_batch = std::max(1, o.n_batch);
  eo.kv_elem = o.kv_elem;
  return eo;
}

int32_t context_of(const ir::Module& target, const RunOptions& o) {
  if (o.n_ctx > 0) return o.n_ctx;
  const ir::SymDim* p = target.find_dim("P");
  return int32_t(p && p->hi > 0 ? std::min<int64_t>(4096, p->hi) : 4096);
}

// One sequence's drafts: greedy tokens of the draft program after the context.
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::shared_ptr<const DraftModel> src) : src_(std::move(src)), seq_(src_->engine()) {}

  std::vector<int32_t> draft(std::span<const int32_t> context, int32_t max) override {
    std::vector<int32_t> out;
    if (context.empty() || max <= 0) return out;
    // Keep what the draft cache shares with the context; the last context token is always fed
    // (its logits give the first draft).
    size_t common = 0;
    while (common < fed_.size() && common < context.size() && fed_[common] == context[common]) ++common;
    common = std::min(common, context.size() - 1);
    const int32_t n_ctx = src_->engine().options().n_ctx;
    if (int64_t(context.size()) + max > n_ctx) return out;  // no room in the draft's context
    if (size_t(seq_.position()) > common) seq_.rollback(int32_t(common));
    fed_.assign(context.begin(), context.end());
    seq_.feed(context.subspan(common), logits_);
    for (int32_t i = 0; i < max; ++i) {
      const int32_t t = int32_t(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
      out.push_back(t);
      if (i + 1 == max) break;
      const int32_t one[1] = {t};
      seq_.feed(one, logits_);
      fed_.push_back(t);
    }
    return out;
  }

 private:
  std::shared_ptr<const DraftModel> src_;  // keeps the draft engine alive
  DirectSequence seq_;
  std::vector<int32_t> fed_;               // the tokens whose KV rows the draft cache holds
  std::vector<float> logits_;              // every draft step's logits, one buffer (not one a token)
};

}  // namespace

void check_same_vocab(const text::Vocab& t, const text::Vocab& d, const std::string& name) {
  if (t.size() != d.size())
    loom::fail("draft {}: vocabulary of {} tokens, the target has {}", name, d.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i)
    if (t.tokens[i].text != d.tokens[i].text)
      loom::fail("draft {}: token {} is '{}', the target's is '{}'", name, i, d.tokens[i].text, t.tokens[i].text);
  const std::pair<const char*, std::pair<text::TokenId, text::TokenId>> ids[] = {
      {"bos", {t.bos, d.bos}}, {"eos", {t.eos, d.eos}}, {"eot", {t.eot, d.eot}}};
  for (const auto& [what, pair] : ids)
    if (pair.first != pair.second)
      loom::fail("draft {}: {} token is {}, the target's is {}", name, what, pair.second, pair.first);
  if (t.eog != d.eog) loom::fail("draft {}: its end-of-generation tokens differ from the target's", name);
}

std::shared_ptr<DraftModel> DraftModel::open(const std::string& path, const ModelBundle& target, const RunOptions& o) {
  auto dm = std::make_shared<DraftModel>();
  dm->name_ = "draft:" + path;
  dm->bundle_.emplace(ModelBundle::load(path));
  check_same_vocab(target.tokenizer().vocab(), dm->bundle_->tokenizer().vocab(), path);
  RunOptions ro = o;
  ro.n_ctx = context_of(target.model().module, o);
  ro.n_blocks = 0;
  dm->engine_ = dm->bundle_->open_engine(ro);
  return dm;
}

std::shared_ptr<DraftModel> DraftModel::derive(const ir::Module& target, const gguf::File& file, int64_t layers,
                                               const RunOptions& o) {
  auto dm = std::make_shared<DraftModel>();
  dm->name_ = "layers:" + std::to_string(layers);
  dm->module_ = port::draft_program(target, layers);
  auto be = backend::make_backend(o.backend);
  auto plan = be->compile(dm->module_, backend::WeightSource::bind(dm->module_, file), {o.threads});
  dm->engine_ = std::make_unique<Engine>(std::move(plan), draft_engine_options(o, context_of(target, o)));
  return dm;
}

std::unique_ptr<Drafter> DraftModel::make() const { return std::make_unique<ModelDrafter>(shared_from_this()); }

}  // namespace loom::runtime::spec
