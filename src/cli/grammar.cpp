// `loom grammar`: compile a constraint (GBNF, JSON Schema, regex, any JSON object) and show it,
// match strings against it, or draw random strings from it. What `loom run --grammar` and the
// server's response_format use, exposed for checking a grammar and for the tests that compare
// Loom's matcher with llama.cpp's on fuzzed inputs.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/files.h"
#include "cli/verb.h"
#include "common/error.h"
#include "runtime/sampler.h"
#include "text/constrain/constraint.h"

namespace loom::cli {
namespace {

namespace tc = text::constrain;

struct GrammarArgs {
  std::string gbnf, schema, regex;
  bool json_object = false, print = false, match = false;
  int samples = 0;
  int max_len = 256;
  uint64_t seed = 1;
};

// A random walk through the grammar byte by byte: ends when the grammar accepts and a coin
// says so (or nothing may follow); a walk past max_len bytes is dropped and retried.
std::optional<std::string> draw(tc::Matcher& m, runtime::Rng& rng, int max_len) {
  m.reset();
  std::string out;
  tc::MatchState next;
  while (int(out.size()) < max_len) {
    if (m.accepting() && (m.state().tops.empty() || (!out.empty() && rng.uniform() < 0.15))) return out;
    const tc::ByteSet bytes = m.next_bytes(m.state());
    std::vector<uint8_t> choices;
    for (int b = 0; b < 256; ++b)
      if (bytes.has(uint8_t(b))) choices.push_back(uint8_t(b));
    if (choices.empty()) return std::nullopt;
    // Prefer printable ASCII when there is some, so strings stay readable.
    std::vector<uint8_t> ascii;
    for (uint8_t b : choices)
      if (b >= 0x20 && b < 0x7F) ascii.push_back(b);
    const auto& pool = !ascii.empty() && rng.uniform() < 0.9 ? ascii : choices;
    const uint8_t b = pool[size_t(rng.next() % pool.size())];
    if (!m.advance(std::string(1, char(b)))) return std::nullopt;
    out += char(b);
  }
  return std::nullopt;
}

void run_grammar(GrammarArgs& a) {
  tc::CompiledGrammar c;
  if (!a.gbnf.empty()) c = tc::compile(tc::SourceKind::gbnf, read_file(a.gbnf));
  else if (!a.schema.empty()) c = tc::compile(tc::SourceKind::json_schema, read_file(a.schema));
  else if (!a.regex.empty()) c = tc::compile(tc::SourceKind::regex, a.regex);
  else if (a.json_object) c = tc::compile(tc::SourceKind::json_object, "");
  else loom::fail("give one of --gbnf FILE, --json-schema FILE, --regex RE, --json-object");
  if (a.print || (!a.match && a.samples == 0)) {
    std::fputs(c.gbnf.c_str(), stdout);
    std::fprintf(stderr, "%zu rules, %zu elements, compiled in %.3f ms, longest string: %s\n", c.grammar->n_rules(),
                 c.grammar->elems.size(), c.compile_seconds * 1e3,
                 c.max_bytes ? fmt::format("{} bytes", *c.max_bytes).c_str() : "unbounded");
  }
  tc::Matcher m(c.grammar);
  if (a.match) {
    // One JSON string per line in; {"prefix": bytes the grammar read, "complete": bool} out.
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      const std::string s = nlohmann::json::parse(line).get<std::string>();
      m.reset();
      size_t n = 0;
      while (n < s.size() && m.advance(s.substr(n, 1))) ++n;
      std::printf("%s\n", nlohmann::json{{"prefix", n}, {"complete", n == s.size() && m.accepting()}}.dump().c_str());
    }
  }
  runtime::Rng rng(a.seed);
  for (int i = 0, tries = 0; i < a.samples && tries < a.samples * 20; ++tries)
    if (auto s = draw(m, rng, a.max_len)) {
      std::printf("%s\n", nlohmann::json(*s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      ++i;
    }
}

const RegisterVerb reg("grammar", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("grammar", "Compile a grammar, JSON Schema or regex; print it, match or sample strings");
  auto a = std::make_shared<GrammarArgs>();
  cmd->add_option("--gbnf", a->gbnf, "GBNF grammar file (llama.cpp's syntax)");
  cmd->add_option("--json-schema", a->schema, "JSON Schema file");
  cmd->add_option("--regex", a->regex, "regular expression");
  cmd->add_flag("--json-object", a->json_object, "any JSON object");
  cmd->add_flag("--print", a->print, "print the GBNF the constraint compiles from (the default action)");
  cmd->add_flag("--match", a->match, "read JSON strings, one a line, from stdin; print how far each matches");
  cmd->add_option("--sample", a->samples, "print N random strings of the grammar, JSON-encoded, one a line");
  cmd->add_option("--max-len", a->max_len, "longest sample in bytes")->capture_default_str();
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->callback([a] { run_grammar(*a); });
});

}  // namespace
}  // namespace loom::cli
