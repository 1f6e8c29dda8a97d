// `loom tokenize -m MODEL.gguf -p TEXT`: the model's tokens for a text, checked against
// llama.cpp by tests/python/test_tokenizer.py. Modes for machines: --ids, --json, --batch
// (one JSON line in, one out, so a corpus costs one process), --dump-pieces (every token's
// bytes) and --bench (encode throughput).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/files.h"
#include "cli/verb.h"
#include "common/error.h"
#include "gguf/file.h"
#include "text/tokenizer.h"

namespace {

using json = nlohmann::json;
using loom::text::TokenId;
using loom::text::Tokenizer;

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64_encode(std::string_view s) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(s[i])) << 16 | uint32_t(uint8_t(s[i + 1])) << 8 | uint8_t(s[i + 2]);
    for (int k = 3; k >= 0; --k) out += kB64[(v >> (6 * k)) & 63];
  }
  if (i + 1 == s.size()) {
    const uint32_t v = uint32_t(uint8_t(s[i])) << 16;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += "==";
  } else if (i + 2 == s.size()) {
    const uint32_t v = uint32_t(uint8_t(s[i])) << 16 | uint32_t(uint8_t(s[i + 1])) << 8;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += kB64[(v >> 6) & 63], out += '=';
  }
  return out;
}

std::string b64_decode(std::string_view s) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const char* p = std::strchr(kB64, c);
    if (!p || !c) loom::fail("tokenize: invalid base64 character '{}'", c);
    acc = acc << 6 | uint32_t(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// A piece for people: printable UTF-8 kept, control bytes and invalid bytes escaped.
std::string visible(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

struct Opts {
  std::string model, prompt, file, batch;
  bool ids = false, no_bos = false, parse_special = false, json_out = false, dump = false;
  std::string bench;
  int repeat = 5;
};

void run_batch(const Tokenizer& tok, const Opts& o) {
  std::ifstream in(o.batch, std::ios::binary);
  if (!in) loom::fail("tokenize: cannot read {}", o.batch);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    json rec;
    try {
      rec = json::parse(line);
    } catch (const json::exception& e) {
      loom::fail("tokenize: {}:{}: not JSON: {}", o.batch, n, e.what());
    }
    std::string text;
    if (rec.contains("b64")) text = b64_decode(rec["b64"].get<std::string>());
    else if (rec.contains("text")) text = rec["text"].get<std::string>();
    else loom::fail("tokenize: {}:{}: needs a \"text\" or \"b64\" field", o.batch, n);
    json out;
    std::vector<TokenId> ids;
    try {
      ids = tok.encode(text, !o.no_bos, o.parse_special);
    } catch (const loom::Error& e) {  // one bad line must not end the batch
      out["error"] = e.what();
      std::cout << out.dump() << '\n';
      continue;
    }
    out["ids"] = ids;
    out["decoded_b64"] = b64_encode(tok.decode(ids, true, o.parse_special));
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
}

void run_dump(const Tokenizer& tok) {
  const auto& v = tok.vocab();
  for (TokenId id = 0; id < TokenId(v.size()); ++id) {
    json out;
    out["id"] = id;
    out["attr"] = v.attr(id);
    out["piece_b64"] = b64_encode(tok.token_to_piece(id, false));
    out["special_b64"] = b64_encode(tok.token_to_piece(id, true));
    std::cout << out.dump() << '\n';
  }
}

// Times encode() only. Each repetition gets a freshly built tokenizer (built outside the
// timed region) so the BPE word cache starts cold every time, as for a first request.
void run_bench(const gguf::File& f, const Opts& o) {
  const std::string text = loom::cli::read_file(o.bench);
  double best = 1e30, total = 0;
  size_t n_tokens = 0;
  for (int r = 0; r < o.repeat; ++r) {
    const Tokenizer tok = Tokenizer::from_gguf(f);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text, !o.no_bos, o.parse_special);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
    n_tokens = ids.size();
  }
  const double mb = double(text.size()) / 1e6;
  json out{{"bytes", text.size()}, {"tokens", n_tokens}, {"repeat", o.repeat}, {"best_s", best},
           {"mean_s", total / o.repeat}, {"mb_per_s_best", mb / best}, {"mb_per_s_mean", mb / (total / o.repeat)}};
  std::cout << out.dump() << '\n';
}

loom::cli::RegisterVerb reg("tokenize", [](CLI::App& root) {
  auto o = std::make_shared<Opts>();
  auto* c = root.add_subcommand("tokenize", "Tokenize text with a GGUF model's tokenizer (as llama.cpp does)");
  c->add_option("-m,--model", o->model, "GGUF model file")->required();
  c->add_option("-p,--prompt", o->prompt, "text to tokenize");
  c->add_option("--file", o->file, "read the text from a file (bytes as they are)");
  c->add_flag("--ids", o->ids, "print only the ids, space-separated");
  c->add_flag("--no-bos", o->no_bos, "do not add BOS/EOS (add_special = false)");
  c->add_flag("--parse-special", o->parse_special, "match control-token texts in the input as those tokens");
  c->add_flag("--json", o->json_out, "print {\"ids\": [...], \"pieces\": [...]}");
  c->add_option("--batch", o->batch, "JSONL file: each line {\"text\"|\"b64\"}; prints {\"ids\", \"decoded_b64\"} per line");
  c->add_flag("--dump-pieces", o->dump, "print every token's piece (base64) as JSONL");
  c->add_option("--bench", o->bench, "time encoding this file; prints MB/s as JSON");
  c->add_option("--repeat", o->repeat, "repetitions for --bench")->check(CLI::PositiveNumber);
  c->callback([o] {
    gguf::File f = gguf::File::open(o->model);
    const Tokenizer tok = Tokenizer::from_gguf(f);
    if (!o->batch.empty()) return run_batch(tok, *o);
    if (o->dump) return run_dump(tok);
    if (!o->bench.empty()) return run_bench(f, *o);
    const std::string text = o->file.empty() ? o->prompt : loom::cli::read_file(o->file);
    const auto ids = tok.encode(text, !o->no_bos, o->parse_special);
    if (o->json_out) {
      json pieces = json::array();
      for (TokenId id : ids) pieces.push_back(tok.token_to_piece(id, true));
      json out{{"ids", ids}, {"pieces", pieces}};
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    } else if (o->ids) {
      std::string s;
      for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
      fmt::print("{}\n", s);
    } else {
      for (TokenId id : ids) fmt::print("{:>7}  '{}'\n", id, visible(tok.token_to_piece(id, true)));
      fmt::print("{} tokens\n", ids.size());
    }
  });
});

}  // namespace
