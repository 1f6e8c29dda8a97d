// The requests of a serving benchmark: made up from a seed (prompt and output lengths drawn
// from stated distributions, an optional system prompt every request shares) or read from a
// JSONL file. The same seed gives the same requests on every machine and against every server,
// so two engines answer exactly the same set.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bench {

// A length drawn per request: "64" (fixed), "uniform:A:B" (A..B inclusive) or
// "normal:MEAN:SD" (rounded, at least 1).
struct LengthDist {
  enum class Kind { fixed, uniform, normal } kind = Kind::fixed;
  double a = 0, b = 0;
  static LengthDist parse(const std::string& spec, const char* what);  // loom::Error naming `what`
  std::string str() const;
};

// splitmix64 (as in stats.cpp): identical on every platform, unlike std's distributions.
struct SeededRng {
  uint64_t s;
  uint64_t next();
  double uniform();  // [0, 1)
  int draw(const LengthDist& d);
};

struct RequestSpec {
  nlohmann::json messages;  // chat: [{role, content}...]
  std::string prompt;       // completions: the same text as one string
  int max_tokens = 0;
};

struct SyntheticSpec {
  uint64_t seed = 1;
  LengthDist prompt_words{LengthDist::Kind::fixed, 42, 42}, output_tokens{LengthDist::Kind::fixed, 64, 64};
  int system_words = 0;  // a shared system prompt of this many words (0: none)
};

// `count` requests. Prompts are random words from a list of common English words (about one
// token each in a byte-level BPE; the server's usage reports the exact count): distinct from
// each other unless they share the system prompt, which is the one repeated prefix.
std::vector<RequestSpec> synthetic_requests(const SyntheticSpec& spec, size_t count, uint64_t first_index = 0);

// One JSON object per line: {"prompt": "…"} or {"messages": [...]}, optional "max_tokens"
// (else default_max_tokens). Blank lines are skipped; anything else wrong is a loom::Error with
// the file and line.
std::vector<RequestSpec> read_requests_jsonl(const std::string& path, int default_max_tokens);

}  // namespace bench
