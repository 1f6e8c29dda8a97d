// Special-token partitioning (llama.cpp's tokenizer_st_partition): before the model tokenizer
// runs, occurrences of control / user-defined / unknown token texts are cut out of the input
// and emitted as those tokens. Longer tokens are placed first; each token claims its
// leftmost non-overlapping occurrences in what is still raw text; lstrip/rstrip attributes
// swallow adjacent ASCII whitespace. Without parse_special only user-defined tokens take part.
#pragma once
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace loom::text {

struct Fragment {
  TokenId token = kNoToken;  // kNoToken: raw text
  std::string_view text;     // raw text (empty for tokens)
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int priority = -1;  // index into vocab.special_tokens when a token ends here
  };
  int child(int node, unsigned char c) const;
  const Vocab& vocab_;
  std::vector<Node> nodes_;
  int root_next_[256];
};

}  // namespace loom::text
