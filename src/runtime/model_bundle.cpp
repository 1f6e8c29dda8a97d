#include "runtime/model_bundle.h"

#include <algorithm>

#include "backend/registry.h"
#include "common/error.h"

namespace loom::runtime {

ModelBundle ModelBundle::load(const std::string& path, const std::string& gguf_override, int64_t min_ctx) {
  ModelBundle b;
  b.model_ = load_model(path, gguf_override, min_ctx);
  b.tok_ = std::make_unique<text::Tokenizer>(text::Tokenizer::from_gguf(*b.model_.file));
  return b;
}

const text::ChatTemplate& ModelBundle::chat_template() const {
  if (!chat_) chat_.emplace(text::chat_template_for(*model_.file));
  return *chat_;
}

std::vector<int32_t> ModelBundle::encode(const std::string& text, bool add_bos, bool parse_special) const {
  return tok_->encode(text, add_bos, parse_special);
}

std::vector<int32_t> ModelBundle::encode_chat(const std::vector<text::ChatMessage>& messages, bool add_bos) const {
  const std::string text = chat_template().render(messages, /*add_generation_prompt=*/true);
  const auto& v = tok_->vocab();
  const std::string bos = v.valid(v.bos) ? tok_->token_to_piece(v.bos, true) : std::string();
  const bool has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
  return tok_->encode(text, add_bos && !has_bos, /*parse_special=*/true);
}

std::unique_ptr<Engine> ModelBundle::open_engine(const RunOptions& opts) const {
  auto be = backend::make_backend(opts.backend);
  auto ws = backend::WeightSource::bind(model_.module, *model_.file);
  auto plan = be->compile(model_.module, ws, {opts.threads});
  EngineOptions eo;
  eo.n_ctx = opts.n_ctx;
  const ir::SymDim* p = model_.module.find_dim("P");
  const int64_t bound = p ? p->hi : 0;
  if (eo.n_ctx <= 0) eo.n_ctx = int32_t(bound > 0 ? std::min<int64_t>(4096, bound) : 4096);
  if (bound > 0 && eo.n_ctx > bound)
    loom::fail("a context of {} positions is more than the program holds (dim P in [0, {}]); port the GGUF with "
               "`loom port --ctx {}`, or run the GGUF itself with that context", eo.n_ctx, bound, eo.n_ctx);
  eo.max_seqs = opts.max_seqs;
  eo.n_batch = opts.n_batch;
  eo.n_blocks = opts.n_blocks;
  eo.kv_elem = opts.kv_elem;
  return std::make_unique<Engine>(std::move(plan), eo, tok_.get());
}

}  // namespace loom::runtime
