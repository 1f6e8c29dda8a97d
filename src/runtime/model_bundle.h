// Everything a front end needs of one model, loaded once: the program and its weights, the
// tokenizer, the chat template (on first use: a completion-only model may have none), and the
// rules for BOS. open_engine() compiles the program for a backend and opens an Engine on it;
// the bundle must outlive the engines opened on it.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace loom::runtime {

struct RunOptions {
  std::string backend = "cpu";  // backend::make_backend name: "cpu" (fast) or "cpu-ref"
  int threads = 0;              // 0: the schedule's threads, else hardware concurrency
  int32_t n_ctx = 0;            // 0: min(4096, the program's bound on positions); more than the bound is refused
  backend::KvElem kv_elem = backend::KvElem::f16;
  int32_t n_batch = 512;
  int32_t max_seqs = 1;
  int32_t n_blocks = 0;         // 0: enough for max_seqs full contexts
};

class ModelBundle {
 public:
  // `min_ctx`: positions the caller will ask open_engine() for (load_model: a GGUF is ported
  // for at least that many).
  static ModelBundle load(const std::string& path, const std::string& gguf_override = "", int64_t min_ctx = 0);

  const LoadedModel& model() const { return model_; }
  LoadedModel& model() { return model_; }  // e.g. a schedule entry added before open_engine()
  const text::Tokenizer& tokenizer() const { return *tok_; }
  // The GGUF's template, else the architecture's built-in; throws loom::Error when neither.
  const text::ChatTemplate& chat_template() const;

  // Text to ids; `add_bos`: the vocabulary's BOS when it adds one.
  std::vector<int32_t> encode(const std::string& text, bool add_bos, bool parse_special) const;
  // The conversation rendered by the chat template (with the generation prompt) and encoded
  // with special tokens parsed; BOS added unless the template wrote it (gemma's
  // `{{ bos_token }}`), so there is never a second one.
  std::vector<int32_t> encode_chat(const std::vector<text::ChatMessage>& messages, bool add_bos = true) const;
  // The same for a whole template request (tools, tool calls, further variables).
  std::vector<int32_t> encode_chat_request(const text::ChatRequest& request, bool add_bos = true) const;
  // Replaces the file's chat template (`loom serve --chat-template-file`); throws loom::Error
  // when the source does not parse.
  void set_chat_template(const std::string& source);

  std::unique_ptr<Engine> open_engine(const RunOptions& opts) const;

 private:
  LoadedModel model_;
  std::unique_ptr<text::Tokenizer> tok_;
  mutable std::optional<text::ChatTemplate> chat_;
  // The first use of the template may come from several server threads at once (the first
  // chat requests): made under this lock, or two threads emplace it over each other.
  std::unique_ptr<std::mutex> chat_mu_ = std::make_unique<std::mutex>();
};

}  // namespace loom::runtime
