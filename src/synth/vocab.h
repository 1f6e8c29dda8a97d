// A GPT-2-style byte-level BPE vocabulary that llama.cpp accepts (tokenizer.ggml.model "gpt2"):
// three control tokens, the 256 byte tokens in GPT-2's bytes_to_unicode spelling, merges learned
// deterministically from a small built-in English text, and "<|reserved_N|>" control tokens
// padding up to the requested size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loom::synth {

struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // llama.cpp: 1 normal, 3 control
  std::vector<std::string> merges;   // "left right", in rank order
  uint32_t bos_id = 0, eos_id = 0;
};

constexpr uint32_t kMinVocab = 3 + 256;
BpeVocab make_bpe_vocab(uint32_t n_vocab);  // throws when n_vocab < kMinVocab

// GPT-2's printable spelling of one byte (e.g. ' ' → "Ġ"), UTF-8 encoded.
std::string byte_to_unicode(uint8_t b);

}  // namespace loom::synth
