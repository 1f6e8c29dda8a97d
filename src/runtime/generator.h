// The generation loop shared by `loom run`, `loom chat` and later the server: feed a prompt
// (re-using whatever prefix of it the session's cache already holds), then sample, feed back
// and stream text until an end-of-generation token, a stop token or the token limit.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

namespace loom::runtime {

struct GenerationStats {
  int32_t prompt_tokens = 0;   // tokens actually evaluated (after prefix re-use)
  int32_t reused_tokens = 0;   // prompt tokens served from the cache
  int32_t generated = 0;
  double prompt_seconds = 0, gen_seconds = 0;
  bool stopped_by_eog = false;
  std::string speed_line() const;  // "prompt: 12 tokens, 180.2 t/s | generation: 64 tokens, 45.1 t/s"
};

class Generator {
 public:
  Generator(Session& session, Sampler& sampler, const text::Tokenizer& tok);

  // Tokens that end a turn in addition to the vocabulary's end-of-generation set.
  void add_stop_token(int32_t id) { stops_.insert(id); }
  // Tokens the session's cache holds, position by position (what prefix re-use compares).
  const std::vector<int32_t>& history() const { return history_; }

  // Brings the session to `prompt` (rolling back to the longest common prefix with history,
  // keeping at least one token to evaluate), then generates up to max_tokens, calling
  // on_text with each complete UTF-8 piece. The stop token itself is not printed but stays in
  // history (so a chat's next turn re-uses it). max_tokens < 0: until the context is full.
  GenerationStats generate(const std::vector<int32_t>& prompt, int32_t max_tokens,
                           const std::function<void(const std::string&)>& on_text);
  void reset();

 private:
  Session& session_;
  Sampler& sampler_;
  const text::Tokenizer& tok_;
  std::set<int32_t> stops_;
  std::vector<int32_t> history_;
};

}  // namespace loom::runtime
