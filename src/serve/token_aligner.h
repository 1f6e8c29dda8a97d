// Which generated tokens a reply's logprobs report, kept in step with the text it sends: the
// engine's events carry complete UTF-8 (a character split across tokens comes with its last
// token) and the stop matcher holds text back and cuts it at a stop sequence, so a token is
// reported only once the text it produced has been sent:
//   - while generating, a token goes out with the chunk that sends the last byte of its text;
//   - at a stop sequence, the tokens whose text begins before the cut are reported (the last
//     may reach into the stop sequence), those wholly after it are not;
//   - an end-of-generation token is never reported (its text is not shown).
#pragma once
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "serve/protocol.h"

namespace loom::serve {

class TokenAligner {
 public:
  // One engine event, in order: its token's report (null for an end token or an event without
  // one), then the decoded text it carried.
  void event(const TokenReport* token, const std::string& text);
  // `sent`: the bytes of generated text sent so far (after stop matching). Returns the tokens
  // now wholly sent.
  std::vector<TokenReport> release(size_t sent);
  // The end of the choice: by a stop sequence (the text was cut at `sent`) or otherwise (all of
  // it was sent). Returns the tokens still to report.
  std::vector<TokenReport> finish(size_t sent, bool by_stop);

 private:
  struct Pending {
    TokenReport report;
    size_t start, end;  // bytes of decoded text; end unknown (npos) until its character completes
  };
  std::deque<Pending> pending_;
  size_t decoded_ = 0, decoded_chars_ = 0;
};

}  // namespace loom::serve
