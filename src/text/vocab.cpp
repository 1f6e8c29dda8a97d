#include "text/vocab.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "gguf/file.h"

namespace loom::text {

namespace {

// How llama.cpp configures each supported tokenizer.ggml.pre name (llama_vocab::impl::load).
struct PreConfig {
  PreType type;
  bool clean_spaces;  // BPE default is true; many families turn it off
  bool ignore_merges;
  bool force_add_bos;  // llama3 family: add_bos defaults to true before metadata overrides
  bool no_bos;         // chatglm: no default BOS id
};

bool pre_config(std::string_view name, PreConfig& c) {
  auto is = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  c = {PreType::Default, true, false, false, false};
  if (name.empty() || name == "default") return true;
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
          "jina-v5-nano"})) {
    c = {PreType::Llama3, true, true, true, false};
    return true;
  }
  if (is({"dbrx", "smaug-bpe"})) { c.type = PreType::Llama3; return true; }
  if (is({"glm4", "chatglm-bpe"})) { c.type = PreType::Llama3; c.no_bos = true; return true; }
  if (is({"deepseek-v3"})) { c.type = PreType::Deepseek3; c.clean_spaces = false; return true; }
  if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
          "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4"})) {
    c.type = PreType::Gpt2;
    return true;
  }
  if (is({"trillion", "granite-docling"})) { c.type = PreType::Gpt2; c.clean_spaces = false; return true; }
  if (is({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"})) {
    c.type = PreType::Qwen2; c.clean_spaces = false; return true;
  }
  if (is({"stablelm2", "megrez"})) { c.type = PreType::Qwen2; return true; }
  if (is({"smollm", "command-r"})) { c.type = PreType::Smollm; c.clean_spaces = false; return true; }
  if (is({"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
    c.type = PreType::Smollm;
    return true;
  }
  return false;
}

const gguf::Value* find_array(const gguf::File& f, std::string_view key, gguf::ValueType elem) {
  const gguf::Value* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != gguf::ValueType::ARRAY || v->as_array().elem != elem)
    loom::fail("tokenizer: {}: {} has the wrong type (expected array of {})", f.path(), key,
               gguf::value_type_name(elem));
  return v;
}

// llama_token_type (GGUF token_type values) → attribute bits.
uint32_t attr_from_type(int64_t t) {
  switch (t) {
    case 2: return kAttrUnknown;
    case 5: return kAttrUnused;
    case 1: return kAttrNormal;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

}  // namespace

void Vocab::index_tokens() {
  std::vector<std::string_view> keys;
  keys.reserve(tokens.size());
  for (const auto& t : tokens) keys.push_back(t.text);
  index_.build(keys);
}

TokenId Vocab::byte_token(uint8_t b) const {
  static const char* hex = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
  TokenId id = find(std::string_view(buf, 6));
  if (id != kNoToken) return id;
  id = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
  if (id == kNoToken) loom::fail("tokenizer: vocabulary has no byte-fallback token for byte 0x{:02X}", b);
  return id;
}

uint8_t Vocab::token_byte(TokenId id) const {
  const std::string& t = tokens[size_t(id)].text;
  if (t.size() < 5) loom::fail("tokenizer: byte token {} '{}' is not of the form <0xXX>", id, t);
  return uint8_t(std::strtol(t.substr(3, 2).c_str(), nullptr, 16));
}

Vocab Vocab::from_gguf(const gguf::File& f) {
  Vocab v;
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre_name = f.get_string("tokenizer.ggml.pre");
  PreConfig pc{};
  if (v.model == "llama") {
    v.kind = VocabKind::Spm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
    v.clean_spaces = false;
  } else if (v.model == "gpt2") {
    v.kind = VocabKind::Bpe;
    v.bos = 11, v.eos = 11;
    if (!pre_config(v.pre_name, pc))
      loom::fail("tokenizer: {}: not supported: pre-tokenizer '{}'", f.path(), v.pre_name);
    v.pre = pc.type;
    v.add_space_prefix = false;
    v.escape_whitespaces = false;
    v.clean_spaces = pc.clean_spaces;
    v.ignore_merges = pc.ignore_merges;
    if (pc.force_add_bos) v.add_bos = true;
    if (pc.no_bos) v.bos = kNoToken;
    const gguf::Value* m = find_array(f, "tokenizer.ggml.merges", gguf::ValueType::STRING);
    if (!m) loom::fail("tokenizer: {}: cannot find tokenizer merges", f.path());
    for (const auto& item : m->as_array().items) {
      const std::string& w = item.as_string();
      const size_t sp = w.find(' ', 1);
      if (sp == std::string::npos) v.merges.emplace_back();
      else v.merges.emplace_back(w.substr(0, sp), w.substr(sp + 1));
    }
  } else if (v.model.empty()) {
    loom::fail("tokenizer: {}: no tokenizer.ggml.model", f.path());
  } else {
    loom::fail("tokenizer: {}: not supported: tokenizer model '{}'", f.path(), v.model);
  }
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  const gguf::Value* toks = find_array(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING);
  if (!toks) loom::fail("tokenizer: {}: cannot find tokenizer vocab (tokenizer.ggml.tokens)", f.path());
  const auto& items = toks->as_array().items;
  const gguf::Value* scores = f.find("tokenizer.ggml.scores");
  if (scores && (scores->type != gguf::ValueType::ARRAY ||
                 (scores->as_array().elem != gguf::ValueType::F32 && scores->as_array().elem != gguf::ValueType::I32)))
    loom::fail("tokenizer: {}: tokenizer.ggml.scores has the wrong type", f.path());
  const gguf::Value* types = find_array(f, "tokenizer.ggml.token_type", gguf::ValueType::I32);
  if (scores && scores->as_array().items.size() < items.size())
    loom::fail("tokenizer: {}: {} scores for {} tokens", f.path(), scores->as_array().items.size(), items.size());
  if (types && types->as_array().items.size() < items.size())
    loom::fail("tokenizer: {}: {} token types for {} tokens", f.path(), types->as_array().items.size(), items.size());

  v.tokens.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    TokenData& t = v.tokens[i];
    t.text = items[i].as_string();
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    t.score = scores ? float(scores->as_array().items[i].as_double()) : 0.0f;
    t.attr = types ? attr_from_type(types->as_array().items[i].as_int()) : kAttrNormal;
  }
  v.index_tokens();
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.find(v.tokens[i].text) != TokenId(i))
      loom::fail("tokenizer: {}: duplicate token in vocabulary: '{}' has ids {} and {}", f.path(),
                 v.tokens[i].text, v.find(v.tokens[i].text), i);

  // Special ids: defaults out of range are disabled; metadata overrides when in range.
  const TokenId n = TokenId(v.tokens.size());
  struct Key { const char* key; TokenId* id; };
  const Key keys[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos}, {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot}, {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk}, {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad}, {"tokenizer.ggml.mask_token_id", &v.mask},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre}, {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  };
  for (const Key& k : keys) {
    if (*k.id >= n) *k.id = kNoToken;
    const gguf::Value* val = f.find(k.key);
    if (!val) continue;
    if (!val->is_integer()) loom::fail("tokenizer: {}: {} is not an integer", f.path(), k.key);
    const int64_t x = val->as_int();
    if (x >= 0 && x < n) *k.id = TokenId(x);
  }
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_sep = f.get_bool("tokenizer.ggml.add_sep_token", v.add_sep);
  if (v.add_bos && v.bos == kNoToken)
    loom::fail("tokenizer: {}: add_bos_token is true, but bos_token_id is not set", f.path());
  if (v.add_eos && v.eos == kNoToken)
    loom::fail("tokenizer: {}: add_eos_token is true, but eos_token_id is not set", f.path());
  if (v.add_sep && v.sep == kNoToken)
    loom::fail("tokenizer: {}: add_sep_token is true, but seperator_token_id is not set", f.path());

  v.apply_attribute_fixups(f);

  for (TokenId id = 0; id < n; ++id)
    if (v.attr(id) & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_tokens.push_back(id);
  // Same call as llama.cpp (std::sort, not stable) so ties between equal-length specials
  // resolve identically with the same standard library.
  std::sort(v.special_tokens.begin(), v.special_tokens.end(), [&](TokenId a, TokenId b) {
    return v.tokens[size_t(a)].text.size() > v.tokens[size_t(b)].text.size();
  });
  return v;
}

}  // namespace loom::text
