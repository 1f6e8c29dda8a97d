#include "bench/request_set.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace bench {
namespace {

// Short, frequent words: each is one token (with its leading space) in SmolLM2's, Llama-3's and
// Qwen's vocabularies, so N words are close to N prompt tokens.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",   "with",
    "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",  "at",    "which",
    "but",   "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",   "all",   "we",    "can",
    "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",  "would", "who",   "so",    "no",
    "time",  "water", "light", "house", "world", "city",  "river", "music", "story", "point", "great", "small",
    "first", "last",  "long",  "little", "old",  "right", "big",   "high",  "next",  "early", "young", "good",
    "people", "year", "way",   "day",   "man",   "thing", "woman", "life",  "child", "work",  "school", "state",
    "family", "group", "country", "problem", "hand", "part", "place", "case", "week", "company", "system", "number"};
constexpr size_t kNWords = sizeof(kWords) / sizeof(kWords[0]);

std::string words(SeededRng& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[rng.next() % kNWords];
  }
  return s;
}

double number(const std::string& s, const std::string& spec, const char* what) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v) && v >= 0) return v;
  } catch (const std::exception&) {
  }
  loom::fail("{} '{}': '{}' is not a non-negative number (forms: N, uniform:A:B, normal:MEAN:SD)", what, spec, s);
}

}  // namespace

LengthDist LengthDist::parse(const std::string& spec, const char* what) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  LengthDist d;
  if (parts.size() == 1) {
    d.a = d.b = number(parts[0], spec, what);
  } else if (parts.size() == 3 && (parts[0] == "uniform" || parts[0] == "normal")) {
    d.kind = parts[0] == "uniform" ? Kind::uniform : Kind::normal;
    d.a = number(parts[1], spec, what);
    d.b = number(parts[2], spec, what);
    if (d.kind == Kind::uniform && d.b < d.a) loom::fail("{} '{}': the range is empty (B < A)", what, spec);
  } else {
    loom::fail("{} '{}': expected N, uniform:A:B or normal:MEAN:SD", what, spec);
  }
  if (d.kind != Kind::normal && (d.a < 1 || d.a != std::floor(d.a) || d.b != std::floor(d.b)))
    loom::fail("{} '{}': lengths are whole numbers of at least 1", what, spec);
  return d;
}

std::string LengthDist::str() const {
  switch (kind) {
    case Kind::fixed: return fmt::format("{}", a);
    case Kind::uniform: return fmt::format("uniform:{}:{}", a, b);
    case Kind::normal: return fmt::format("normal:{}:{}", a, b);
  }
  return "";
}

uint64_t SeededRng::next() {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double SeededRng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int SeededRng::draw(const LengthDist& d) {
  switch (d.kind) {
    case LengthDist::Kind::fixed: return int(d.a);
    case LengthDist::Kind::uniform: return int(d.a) + int(next() % uint64_t(d.b - d.a + 1));
    case LengthDist::Kind::normal: {
      // Box-Muller on our own uniforms: the same draw on every platform.
      const double u1 = 1 - uniform(), u2 = uniform();
      const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      return std::max(1, int(std::lround(d.a + d.b * z)));
    }
  }
  return 1;
}

std::vector<RequestSpec> synthetic_requests(const SyntheticSpec& spec, size_t count, uint64_t first_index) {
  SeededRng sys_rng{spec.seed ^ 0x5157e3ull};
  const std::string system = words(sys_rng, spec.system_words);
  std::vector<RequestSpec> out;
  for (size_t i = 0; i < count; ++i) {
    // Request i depends on (seed, i) alone: a warm-up set drawn from other indices never
    // repeats a measured prompt, and a run of fewer requests is a prefix of a longer one.
    SeededRng rng{spec.seed * 0x9e3779b97f4a7c15ull + first_index + i};
    RequestSpec r;
    const std::string user = words(rng, rng.draw(spec.prompt_words));
    r.max_tokens = rng.draw(spec.output_tokens);
    r.messages = nlohmann::json::array();
    if (!system.empty()) r.messages.push_back({{"role", "system"}, {"content", system}});
    r.messages.push_back({{"role", "user"}, {"content", user}});
    r.prompt = system.empty() ? user : system + "\n\n" + user;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RequestSpec> read_requests_jsonl(const std::string& path, int default_max_tokens) {
  std::ifstream in(path);
  if (!in) loom::fail("cannot read the request file {}", path);
  std::vector<RequestSpec> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json o;
    try {
      o = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      loom::fail("{}:{}: not JSON ({})", path, n, e.what());
    }
    if (!o.is_object()) loom::fail("{}:{}: each line must be a JSON object", path, n);
    RequestSpec r;
    r.max_tokens = default_max_tokens;
    if (o.contains("max_tokens")) {
      if (!o["max_tokens"].is_number_integer() || o["max_tokens"].get<int64_t>() < 1)
        loom::fail("{}:{}: 'max_tokens' must be a positive integer", path, n);
      r.max_tokens = int(o["max_tokens"].get<int64_t>());
    }
    if (o.contains("messages")) {
      const auto& m = o["messages"];
      if (!m.is_array() || m.empty()) loom::fail("{}:{}: 'messages' must be a non-empty array", path, n);
      for (const auto& msg : m) {
        if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content") ||
            !msg["content"].is_string())
          loom::fail("{}:{}: every message needs a string 'role' and 'content'", path, n);
        if (!r.prompt.empty()) r.prompt += "\n\n";
        r.prompt += msg["content"].get<std::string>();
      }
      r.messages = m;
    } else if (o.contains("prompt") && o["prompt"].is_string()) {
      r.prompt = o["prompt"].get<std::string>();
      r.messages = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
    } else {
      loom::fail("{}:{}: needs 'prompt' (a string) or 'messages'", path, n);
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) loom::fail("the request file {} holds no requests", path);
  return out;
}

}  // namespace bench
