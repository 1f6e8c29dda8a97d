// Incremental detokenization for streamed generation: feed token ids one at a time and get
// back only complete UTF-8. A character split across tokens (byte-fallback tokens, byte-level
// BPE pieces of an emoji) is held until its last byte arrives. Bytes that can never form a
// valid character are replaced by U+FFFD (one per maximal invalid subpart, the Unicode
// recommended practice) as soon as they are known to be invalid; an incomplete character
// still pending at finish() is flushed as one U+FFFD.
#pragma once
#include <string>

#include "text/tokenizer.h"

namespace loom::text {

class StreamDecoder {
 public:
  // `special`: render control tokens' text (as token_to_piece(id, true)).
  explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(tok), special_(special) {}

  // Returns the text that became complete with this token (possibly empty).
  std::string push(TokenId id);
  // Raw bytes in, complete UTF-8 out; push(id) is push_bytes(token_to_piece(id)).
  std::string push_bytes(std::string_view bytes);
  // Flushes what is still held (as U+FFFD) and resets.
  std::string finish();
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tok_;
  bool special_;
  std::string pending_;
};

}  // namespace loom::text
