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
  std::lock_guard<std::mutex> lock(*chat_mu_);
  if (!chat_) chat_.emplace(text::chat_template_for(*model_.file));
  return *chat_;
}

std::vector<int32_t> ModelBundle::encode(const std::string& text, bool add_bos, bool parse_special) const {
  return tok_->encode(text, add_bos, parse_special);
}

void ModelBundle::set_chat_template(const std::string& source) {
  const auto& f = *model_.file;
  std::lock_guard<std::mutex> lock(*chat_mu_);
  chat_.emplace(source, text::token_text(f, "tokenizer.ggml.bos_token_id"),
                text::token_text(f, "tokenizer.ggml.eos_token_id"));
}

std::vector<int32_t> ModelBundle::encode_chat(const std::vector<text::ChatMessage>& messages, bool add_bos) const {
  text::ChatRequest req;
  for (const auto& m : messages) req.messages.push_back({{"role", m.role}, {"content", m.content}});
  return encode_chat_request(req, add_bos);
}

std::vector<int32_t> ModelBundle::encode_chat_request(const text::ChatRequest& request, bool add_bos) const {
  text::ChatRequest req = request;
  req.add_generation_prompt = true;
  const std::string text = chat_template().render(req);
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
