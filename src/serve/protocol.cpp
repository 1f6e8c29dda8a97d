#include "serve/protocol.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "common/error.h"
#include "text/utf8.h"

namespace loom::serve {

using nlohmann::json;

namespace {

constexpr int kMaxDepth = 64;  // nlohmann's parser recurses: a nesting bomb must not reach it

void check_depth(const std::string& s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) throw ApiError(400, fmt::format("request body nests deeper than {} levels", kMaxDepth));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw ApiError(400, fmt::format("'{}': {}", param, what), "invalid_request_error", param);
}

const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& o, const char* name, double def, double lo, double hi) {
  const json* v = field(o, name);
  if (!v) return def;
  if (!v->is_number()) bad(name, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

int64_t integer(const json& o, const char* name, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(o, name);
  if (!v) return def;
  if (!v->is_number_integer()) bad(name, "must be an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

bool boolean(const json& o, const char* name, bool def) {
  const json* v = field(o, name);
  if (!v) return def;
  if (!v->is_boolean()) bad(name, "must be true or false");
  return v->get<bool>();
}

// Fields a client may send that Loom does not implement yet: refused by name, never ignored.
void refuse_unsupported(const json& o) {
  for (const char* f : {"functions", "function_call", "logit_bias", "suffix", "best_of"})
    if (const json* v = field(o, f); v && !(v->is_array() && v->empty()))
      throw ApiError(400, fmt::format("'{}' is not supported by this server yet", f), "invalid_request_error", f);
}

// response_format: text (nothing), json_object, or json_schema ({"json_schema": {"name",
// "schema", "strict"}}). The schema is read again from the body in its written key order
// (properties are generated in the order the schema lists them).
std::shared_ptr<const text::constrain::CompiledGrammar> response_format(const json& o, const std::string& body) {
  namespace tc = text::constrain;
  const json* rf = field(o, "response_format");
  if (!rf) return nullptr;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) bad("response_format", "must be an object with a 'type'");
  const std::string type = (*rf)["type"];
  try {
    if (type == "text") return nullptr;
    if (type == "json_object") return std::make_shared<tc::CompiledGrammar>(tc::compile(tc::SourceKind::json_object, ""));
    if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) bad("response_format.json_schema", "is required with type 'json_schema' and must be an object");
      if (const json* st = field(*js, "strict"); st && !st->is_boolean()) bad("response_format.json_schema.strict", "must be true or false");
      const json* schema = field(*js, "schema");
      if (!schema) bad("response_format.json_schema.schema", "is required");
      const auto ordered = nlohmann::ordered_json::parse(body);
      return std::make_shared<tc::CompiledGrammar>(
          tc::compile(tc::SourceKind::json_schema, ordered["response_format"]["json_schema"]["schema"].dump()));
    }
  } catch (const loom::Error& e) {
    throw ApiError(400, fmt::format("response_format: {}", e.what()), "invalid_request_error", "response_format");
  }
  throw ApiError(400, fmt::format("response_format type '{}' is not supported (text, json_object, json_schema)", type),
                 "invalid_request_error", "response_format");
}

Generation parse_generation(const json& o, const Limits& lim) {
  refuse_unsupported(o);
  Generation g;
  const json* model = field(o, "model");
  if (!model) bad("model", "is required");
  if (!model->is_string()) bad("model", "must be a string");
  g.model = model->get<std::string>();
  auto& s = g.sampling;
  // Absent fields take llama-server's defaults, which llama.cpp users expect.
  s.temperature = float(number(o, "temperature", 0.8, 0, 2));
  s.top_p = float(number(o, "top_p", 0.95, 0, 1));
  s.top_k = int32_t(integer(o, "top_k", 40, 0, 1 << 20));
  s.min_p = float(number(o, "min_p", 0.05, 0, 1));
  s.presence_penalty = float(number(o, "presence_penalty", 0, -2, 2));
  s.frequency_penalty = float(number(o, "frequency_penalty", 0, -2, 2));
  s.repeat_penalty = float(number(o, "repeat_penalty", 1, 1e-3, 10));
  if (const json* seed = field(o, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
    g.seed_given = true;
  } else {
    s.seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  }
  const int64_t mt = integer(o, "max_completion_tokens", integer(o, "max_tokens", -1, 1, 1 << 24), 1, 1 << 24);
  g.max_tokens = int32_t(mt);
  if (const json* stop = field(o, "stop")) {
    if (stop->is_string()) {
      g.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > lim.max_stop) bad("stop", fmt::format("at most {} stop sequences", lim.max_stop));
      for (const auto& x : *stop) {
        if (!x.is_string()) bad("stop", "must be a string or an array of strings");
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or an array of strings");
    }
    for (const auto& x : g.stop)
      if (x.empty()) bad("stop", "stop sequences must not be empty");
  }
  g.ignore_eos = boolean(o, "ignore_eos", false);
  if (const json* sp = field(o, "speculation")) {
    if (!sp->is_string() || (*sp != "none" && *sp != "lookup" && *sp != "draft"))
      bad("speculation", "must be \"none\", \"lookup\" or \"draft\"");
    g.speculation = sp->get<std::string>();
  }
  g.draft_max = int32_t(integer(o, "draft_max", 0, 1, 64));
  g.n = int32_t(integer(o, "n", 1, 1, lim.max_n));
  g.stream = boolean(o, "stream", false);
  if (const json* so = field(o, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    if (!g.stream) bad("stream_options", "is only allowed with stream: true");
    g.include_usage = boolean(*so, "include_usage", false);
  }
  return g;
}

}  // namespace

json ApiError::body() const {
  return {{"error", {{"message", what()}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                     {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json parse_body(const std::string& body) {
  size_t tail = 0;
  if (text::utf8_valid_prefix(body, tail) != body.size() || tail != 0)
    throw ApiError(400, "request body is not valid UTF-8");
  check_depth(body);
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // syntax, and numbers out of double's range (1e999)
    throw ApiError(400, fmt::format("request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw ApiError(400, "request body must be a JSON object");
  return j;
}

ChatRequest parse_chat(const std::string& body, const Limits& lim) {
  const json o = parse_body(body);
  ChatRequest r;
  r.gen = parse_generation(o, lim);
  r.gen.grammar = response_format(o, body);
  r.gen.logprobs = boolean(o, "logprobs", false);
  if (field(o, "top_logprobs")) {
    r.gen.top_logprobs = int32_t(integer(o, "top_logprobs", 0, 0, runtime::kMaxTopLogprobs));
    if (!r.gen.logprobs) bad("top_logprobs", "requires 'logprobs': true");
  }
  const auto ordered = nlohmann::ordered_json::parse(body);
  r.messages = parse_messages(ordered, lim);
  r.tools = parse_tools(ordered);
  if (r.tools.active() && r.gen.grammar)
    bad("response_format", "together with 'tools' is not supported yet (tool_choice \"none\" allows it)");
  if (r.tools.active() && r.gen.logprobs) bad("logprobs", "together with 'tools' is not supported yet");
  return r;
}

CompletionRequest parse_completion(const std::string& body, const Limits& lim) {
  const json o = parse_body(body);
  for (const char* f : {"tools", "tool_choice", "parallel_tool_calls"})
    if (field(o, f)) bad(f, "is a chat field (/v1/chat/completions)");
  CompletionRequest r;
  r.gen = parse_generation(o, lim);
  r.gen.grammar = response_format(o, body);
  const json* p = field(o, "prompt");
  if (!p) bad("prompt", "is required");
  if (p->is_string()) r.prompt = p->get<std::string>();
  else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) r.prompt = (*p)[0].get<std::string>();
  else bad("prompt", "must be a string (batched prompts are not supported yet)");
  if (r.prompt.size() > lim.max_prompt_bytes) bad("prompt", fmt::format("more than {} bytes", lim.max_prompt_bytes));
  r.echo = boolean(o, "echo", false);
  // The legacy form: 'logprobs' is the number of top tokens (OpenAI allows at most 5).
  if (field(o, "logprobs")) {
    r.gen.logprobs = true;
    r.gen.top_logprobs = int32_t(integer(o, "logprobs", 0, 0, 5));
  }
  if (field(o, "top_logprobs")) bad("top_logprobs", "is a chat field; /v1/completions takes 'logprobs': N (0 to 5)");
  if (r.echo && r.gen.logprobs)
    throw ApiError(400, "'echo' with 'logprobs' (the prompt's log-probabilities) is not supported by this server yet",
                   "invalid_request_error", "echo");
  return r;
}

json Usage::json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

namespace {

json tool_call_json(const text::tools::Call& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

// The assistant message of a choice: its text, and its tool calls (content null when it
// said nothing besides them, as OpenAI's replies have it).
json message(const Choice& c) {
  json m = {{"role", "assistant"}, {"content", c.calls.empty() || !c.text.empty() ? json(c.text) : json(nullptr)}};
  if (!c.calls.empty()) {
    json calls = json::array();
    for (const auto& call : c.calls) calls.push_back(tool_call_json(call));
    m["tool_calls"] = calls;
  }
  return m;
}

}  // namespace

json chat_response(const std::string& id, const std::string& model, int64_t created, const std::vector<Choice>& choices,
                   const Usage& u) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    cs.push_back({{"index", i},
                  {"message", message(choices[i])},
                  {"logprobs", choices[i].logprobs ? chat_logprobs(choices[i].tokens) : json(nullptr)},
                  {"finish_reason", choices[i].finish_reason}});
  return {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model}, {"choices", cs},
          {"usage", u.json()}};
}

json completion_response(const std::string& id, const std::string& model, int64_t created,
                         const std::vector<Choice>& choices, const Usage& u) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    cs.push_back({{"index", i},
                  {"text", choices[i].text},
                  {"logprobs", choices[i].logprobs ? completion_logprobs(choices[i].tokens, 0) : json(nullptr)},
                  {"finish_reason", choices[i].finish_reason}});
  return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", cs},
          {"usage", u.json()}};
}

json chat_chunk(const std::string& id, const std::string& model, int64_t created, int index, const std::string* role,
                const std::string& text, const std::string* finish_reason, const json* logprobs) {
  json delta = json::object();
  if (role) delta["role"] = *role;
  if (!text.empty() || (!finish_reason && !role)) delta["content"] = text;
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", {{{"index", index}, {"delta", delta}, {"logprobs", logprobs ? *logprobs : json(nullptr)},
                        {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}}}}};
}

json completion_chunk(const std::string& id, const std::string& model, int64_t created, int index,
                      const std::string& text, const std::string* finish_reason, const json* logprobs) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", {{{"index", index}, {"text", text}, {"logprobs", logprobs ? *logprobs : json(nullptr)},
                        {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}}}}};
}

namespace {

// A piece as a JSON string: valid UTF-8 as it is, each invalid or incomplete sequence as U+FFFD.
std::string token_string(const std::string& piece) {
  std::string out;
  std::string_view rest = piece;
  while (!rest.empty()) {
    size_t tail = 0;
    const size_t ok = text::utf8_valid_prefix(rest, tail);
    const size_t keep = ok == rest.size() ? ok - tail : ok;
    out.append(rest.substr(0, keep));
    if (keep == rest.size()) break;
    out += "\xEF\xBF\xBD";
    rest.remove_prefix(ok == rest.size() ? rest.size() : keep + 1);
  }
  return out;
}

// OpenAI's stand-in for a probability that underflowed to 0 (JSON has no -Infinity).
double finite(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

json byte_list(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(int(c));
  return b;
}

}  // namespace

json chat_logprobs(const std::vector<TokenReport>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [piece, lp] : t.top)
      top.push_back({{"token", token_string(piece)}, {"logprob", finite(lp)}, {"bytes", byte_list(piece)}});
    content.push_back({{"token", token_string(t.piece)},
                       {"logprob", finite(t.logprob)},
                       {"bytes", byte_list(t.piece)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(const std::vector<TokenReport>& tokens, int64_t offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const auto& t : tokens) {
    toks.push_back(token_string(t.piece));
    lps.push_back(finite(t.logprob));
    json top = json::object();
    for (const auto& [piece, lp] : t.top) {
      const std::string k = token_string(piece);
      if (!top.contains(k)) top[k] = finite(lp);  // two pieces that differ only in invalid bytes: the likelier
    }
    if (!top.contains(token_string(t.piece))) top[token_string(t.piece)] = finite(t.logprob);
    tops.push_back(top);
    offs.push_back(offset + t.text_offset);
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

std::vector<json> tool_call_chunks(const std::string& id, const std::string& model, int64_t created, int index,
                                   const std::vector<text::tools::Call>& calls, size_t first) {
  // Arguments go out in pieces of this many bytes (never inside a UTF-8 sequence), as a
  // client that assembles deltas must expect.
  constexpr size_t kFragment = 16;
  std::vector<json> out;
  auto chunk = [&](json call_delta) {
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", {{{"index", index}, {"delta", {{"tool_calls", json::array({std::move(call_delta)})}}},
                              {"logprobs", nullptr}, {"finish_reason", nullptr}}}}};
  };
  for (size_t k = 0; k < calls.size(); ++k) {
    const auto& c = calls[k];
    out.push_back(chunk({{"index", first + k}, {"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}}));
    for (size_t at = 0; at < c.arguments.size();) {
      size_t n = std::min(kFragment, c.arguments.size() - at);
      while (at + n < c.arguments.size() && (uint8_t(c.arguments[at + n]) & 0xC0) == 0x80) ++n;
      out.push_back(chunk({{"index", first + k}, {"function", {{"arguments", c.arguments.substr(at, n)}}}}));
      at += n;
    }
  }
  return out;
}

json usage_chunk(const std::string& id, const std::string& object, const std::string& model, int64_t created,
                 const Usage& u) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"choices", json::array()},
          {"usage", u.json()}};
}

}  // namespace loom::serve
