#include "synth/vocab.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "common/error.h"

namespace loom::synth {
namespace {

// Training text for the merges: ordinary English, so the learned pieces look like real ones.
constexpr const char* kText =
    "The quick brown fox jumps over the lazy dog. Once upon a time there was a little girl who "
    "lived in a village near the forest. Whenever she went out, the little girl wore a red riding "
    "cloak, so everyone in the village called her Little Red Riding Hood. One morning she asked her "
    "mother if she could go to visit her grandmother, as it had been a while since they had seen "
    "each other. That is a good idea, her mother said. So they packed a nice basket for her to take "
    "to her grandmother. The weather was warm and the path through the trees was long and quiet. "
    "In the beginning there was only the river, and the people who lived beside it learned to read "
    "the water the way others read the sky. They built their houses on the higher ground and their "
    "boats from the wood of the tallest trees. Every spring the river rose and every autumn it fell, "
    "and the children counted the seasons by the marks it left on the stones. A computer program is "
    "a list of instructions that tells the machine what to do, one step after another. The program "
    "reads the input, computes the result, and writes the output to the screen or to a file. When "
    "something goes wrong, a good program reports the error clearly and does not crash. Models that "
    "predict the next word are trained on large amounts of text, and they learn which words tend to "
    "follow which. The more often two pieces appear together, the sooner they are merged into one. "
    "What is the capital of France? The capital of France is Paris. How many days are there in a "
    "week? There are seven days in a week. Thank you for your help, and have a wonderful day.\n";

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 onwards.
std::vector<uint32_t> byte_codepoints() {
  std::vector<uint32_t> cp(256);
  std::vector<bool> direct(256, false);
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  uint32_t n = 0;
  for (int b = 0; b < 256; ++b) cp[b] = direct[b] ? uint32_t(b) : 256 + n++;
  return cp;
}

std::string utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// Words as GPT-2 pre-tokenizes them roughly: a leading space belongs to the following word.
std::vector<std::vector<std::string>> training_words() {
  std::vector<std::vector<std::string>> words;
  std::string text = kText;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i + 1;
    auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (text[i] == ' ' || is_alpha(text[i]))
      while (j < text.size() && is_alpha(text[j])) ++j;
    std::vector<std::string> w;
    for (size_t k = i; k < j; ++k) w.push_back(byte_to_unicode(uint8_t(text[k])));
    words.push_back(std::move(w));
    i = j;
  }
  return words;
}

}  // namespace

std::string byte_to_unicode(uint8_t b) {
  static const std::vector<uint32_t> cp = byte_codepoints();
  return utf8(cp[b]);
}

BpeVocab make_bpe_vocab(uint32_t n_vocab) {
  if (n_vocab < kMinVocab)
    loom::fail("synth: vocab {} is too small: a byte-level BPE vocab needs at least {} tokens", n_vocab, kMinVocab);
  BpeVocab v;
  auto add = [&](std::string t, int32_t type) {
    v.tokens.push_back(std::move(t));
    v.token_types.push_back(type);
  };
  add("<|endoftext|>", 3);
  add("<|im_start|>", 3);
  add("<|im_end|>", 3);
  v.bos_id = 1;
  v.eos_id = 2;
  std::set<std::string> known;
  for (int b = 0; b < 256; ++b) {
    add(byte_to_unicode(uint8_t(b)), 1);
    known.insert(v.tokens.back());
  }

  // Greedy BPE training: merge the most frequent adjacent pair (ties: smallest pair) until the
  // vocabulary is full or no pair occurs twice.
  auto words = training_words();
  while (v.tokens.size() < n_vocab) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& w : words)
      for (size_t k = 0; k + 1 < w.size(); ++k) ++counts[{w[k], w[k + 1]}];
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;
    for (const auto& [p, n] : counts)
      if (n > best_n) best = &p, best_n = n;
    if (!best) break;
    auto [a, b] = *best;
    std::string merged = a + b;
    v.merges.push_back(a + " " + b);
    if (known.insert(merged).second) add(merged, 1);
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t k = 0; k < w.size(); ++k) {
        if (k + 1 < w.size() && w[k] == a && w[k + 1] == b) {
          out.push_back(merged);
          ++k;
        } else {
          out.push_back(w[k]);
        }
      }
      w = std::move(out);
    }
  }
  for (uint32_t r = 0; v.tokens.size() < n_vocab; ++r) add(fmt::format("<|reserved_{}|>", r), 3);
  return v;
}

}  // namespace loom::synth
