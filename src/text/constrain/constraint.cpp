#include "text/constrain/constraint.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/constrain/gbnf.h"
#include "text/constrain/json_schema.h"
#include "text/constrain/regex.h"

namespace loom::text::constrain {

namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kMaxCachedMasks = 512;
constexpr size_t kCompactAt = size_t(1) << 21;  // arena nodes
}  // namespace

SourceKind parse_source_kind(const std::string& name) {
  if (name == "gbnf" || name == "grammar") return SourceKind::gbnf;
  if (name == "json-schema" || name == "json_schema") return SourceKind::json_schema;
  if (name == "json-object" || name == "json_object") return SourceKind::json_object;
  if (name == "regex") return SourceKind::regex;
  loom::fail("unknown constraint kind '{}' (gbnf, json-schema, json-object, regex)", name);
}

CompiledGrammar compile(SourceKind kind, const std::string& text) {
  const auto t0 = Clock::now();
  CompiledGrammar c;
  switch (kind) {
    case SourceKind::gbnf: c.gbnf = text; break;
    case SourceKind::json_object: c.gbnf = json_object_gbnf(); break;
    case SourceKind::regex: c.gbnf = "root ::= " + regex_to_gbnf(text) + "\n"; break;
    case SourceKind::json_schema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        loom::fail("JSON Schema is not valid JSON: {}", e.what());
      }
      c.gbnf = json_schema_to_gbnf(schema);
      break;
    }
  }
  c.grammar = std::make_shared<const Grammar>(parse_gbnf(c.gbnf));
  c.max_bytes = c.grammar->max_bytes();
  c.compile_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return c;
}

Constraint::Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> trie)
    : m_(std::move(g)), trie_(std::move(trie)) {}

const std::vector<uint64_t>& Constraint::mask() {
  if (current_) return *current_;
  const auto t0 = Clock::now();
  const MatchState& s = m_.state();
  std::string key(reinterpret_cast<const char*>(s.tops.data()), s.tops.size() * sizeof(uint32_t));
  key += s.accepting ? '1' : '0';
  auto it = cache_.find(key);
  const uint32_t budget = scratch_.budget;
  if (it != cache_.end() && (budget == UINT32_MAX || uint64_t(it->second.max_need) + 2 <= budget)) {
    ++hits_;
    current_ = &it->second.mask;
  } else {
    std::vector<uint64_t> mask;
    trie_->allowed_tokens(m_, mask, scratch_);
    if (scratch_.cut && std::none_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; })) {
      // Too few tokens left for any completion: the output will be cut, as without a budget.
      const uint32_t keep = scratch_.budget;
      scratch_.budget = UINT32_MAX;
      trie_->allowed_tokens(m_, mask, scratch_);
      scratch_.budget = keep;
    }
    if (scratch_.cut) {
      uncached_ = std::move(mask);
      current_ = &uncached_;
    } else {
      if (cache_.size() >= kMaxCachedMasks) cache_.clear();
      CachedMask& c = cache_[key];
      c.mask = std::move(mask);
      c.max_need = scratch_.max_need;
      current_ = &c.mask;
    }
  }
  ++masks_;
  mask_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  return *current_;
}

void Constraint::set_budget(int32_t tokens_left) {
  const uint32_t b = tokens_left < 0 ? UINT32_MAX : uint32_t(tokens_left);
  if (b != scratch_.budget) current_ = nullptr;
  scratch_.budget = b;
}

bool Constraint::allowed(int32_t token) {
  const auto& m = mask();
  return token >= 0 && size_t(token) < trie_->vocab_size() && ((m[size_t(token) >> 6] >> (token & 63)) & 1);
}

void Constraint::accept(int32_t token) {
  if (!allowed(token)) loom::fail("token {} is not allowed by the constraint here", token);
  for (int32_t e : trie_->eog())
    if (e == token) return;
  if (!m_.advance(trie_->piece(token))) loom::fail("token {} is not allowed by the constraint here", token);
  current_ = nullptr;
  if (m_.arena_size() > kCompactAt) {  // node ids change: the cached masks go too
    m_.compact();
    cache_.clear();
    scratch_.clear();
  }
}

}  // namespace loom::text::constrain
