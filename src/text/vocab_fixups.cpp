// Attribute fix-ups llama.cpp applies after reading a vocabulary. GGUF files carry token types
// but not every attribute llama.cpp relies on, so it recognises well-known token texts (EOT,
// FIM, EOG markers, "unused" placeholders) and adjusts their attributes. The tokenizer's
// special-token matching and token_to_piece depend on these bits, so Loom applies the same
// rules in the same order.
#include <algorithm>
#include <string_view>

#include "gguf/file.h"
#include "text/vocab.h"

namespace loom::text {

namespace {
bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}
}  // namespace

void Vocab::apply_attribute_fixups(const gguf::File& f) {
  const TokenId n = TokenId(tokens.size());
  auto make_control = [&](TokenId id) { tokens[size_t(id)].attr |= kAttrControl; };

  // Auto-detected roles (only where metadata did not name them). llama.cpp walks an
  // unordered_map here, so with several candidates its pick is unordered; Loom takes the
  // lowest id. Every candidate that can be picked also ends up in the EOG list below or is
  // already a control token in the known vocabularies, so tokenization does not depend on it.
  struct Role {
    TokenId* id;
    std::initializer_list<std::string_view> names;
  };
  const Role roles[] = {
      {&eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
              "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
      {&eom, {"<|eom_id|>"}},
      {&fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                  "<|code_prefix|>", "<|prefix|>"}},
      {&fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                  "<|code_suffix|>", "<|suffix|>"}},
      {&fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                  "<|code_middle|>", "<|middle|>"}},
      {&fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&fim_sep, {"<|file_sep|>"}},
  };
  for (const Role& r : roles) {
    if (*r.id != kNoToken) continue;
    for (TokenId id = 0; id < n; ++id) {
      if (one_of(tokens[size_t(id)].text, r.names)) {
        *r.id = id;
        make_control(id);
        break;
      }
    }
  }

  // Control tokens named like "unused" placeholders are unused.
  for (auto& t : tokens)
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;

  eog.clear();
  for (TokenId id : {fim_pad, fim_rep, fim_sep})
    if (id != kNoToken) eog.insert(id);
  for (TokenId id = 0; id < n; ++id) {
    if (one_of(tokens[size_t(id)].text,
               {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                "<｜end▁of▁sentence｜>", "[e~["})) {
      eog.insert(id);
      make_control(id);
    }
  }
  // gpt-oss: these are always rendered.
  for (auto& t : tokens)
    if (one_of(t.text, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) t.attr = kAttrUserDefined;
  for (TokenId id : {eos, eot, eom})
    if (id != kNoToken) eog.insert(id);

  // o200k_harmony / solar-open: "<|end|>" is not an end of generation there.
  {
    bool has_return = false, has_call = false, has_end = false, has_flush = false;
    TokenId end_id = kNoToken;
    for (TokenId id : eog) {
      if (!valid(id)) continue;
      const std::string& t = tokens[size_t(id)].text;
      if (t == "<|return|>") has_return = true;
      else if (t == "<|call|>" || t == "<|calls|>") has_call = true;
      else if (t == "<|flush|>") has_flush = true;
      else if (t == "<|end|>") has_end = true, end_id = id;
    }
    if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
      eog.erase(end_id);
      tokens[size_t(end_id)].attr = kAttrUserDefined;
    }
  }
  // gemma4 / paddleocr: "</s>" is not an end of generation when "<|tool_response>" exists.
  {
    bool has_tool_response = false;
    TokenId s_id = kNoToken;
    for (TokenId id : eog) {
      if (!valid(id)) continue;
      const std::string& t = tokens[size_t(id)].text;
      if (t == "<|tool_response>") has_tool_response = true;
      else if (t == "</s>") s_id = id;
    }
    if (has_tool_response && s_id != kNoToken) {
      eog.erase(s_id);
      tokens[size_t(s_id)].attr = kAttrNormal;
    }
  }

  // Per-model strip attributes that GGUF does not carry.
  std::string name = f.get_string("general.name");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::string arch = f.get_string("general.architecture");
  auto contains = [](const std::string& s, std::initializer_list<std::string_view> subs) {
    return std::any_of(subs.begin(), subs.end(), [&](std::string_view x) { return s.find(x) != std::string::npos; });
  };
  auto set_attr = [&](std::string_view text, uint32_t bit, bool on) {
    TokenId id = find(text);
    if (id == kNoToken) return;
    tokens[size_t(id)].attr = on ? (tokens[size_t(id)].attr | bit) : (tokens[size_t(id)].attr & ~bit);
  };
  if (contains(pre_name, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (contains(name, {"phi-3", "phi3"})) {
    for (TokenId id = 0; id < n; ++id)
      if (tokens[size_t(id)].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown))
        tokens[size_t(id)].attr |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (auto t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRstrip, false);
  } else if (contains(name, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace loom::text
