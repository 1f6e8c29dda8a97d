// The OpenAI wire protocol of `loom serve`: request bodies parsed and checked into typed
// requests (every wrong field is a 400 naming it, in OpenAI's error shape), and the JSON of
// responses and stream chunks. Nothing here knows HTTP or the engine.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "text/constrain/constraint.h"
#include "text/chat_template.h"
#include "text/tools/tool_call.h"

namespace loom::serve {

// An error a client caused (or a refusal): HTTP status plus OpenAI's error object.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  nlohmann::json body() const;
};

struct Limits {
  size_t max_messages = 4096;     // per chat request
  size_t max_stop = 16;           // stop strings per request
  int32_t max_n = 16;             // choices per request
  size_t max_prompt_bytes = 1 << 22;
};

// What both endpoints share once parsed.
struct Generation {
  std::string model;
  runtime::SamplerParams sampling;
  bool seed_given = false;
  int32_t max_tokens = -1;        // -1: until the context is full
  std::vector<std::string> stop;
  bool ignore_eos = false;        // llama-server's and vLLM's field: generate past end-of-generation tokens
  int32_t n = 1;
  bool stream = false, include_usage = false;
  // chat: 'logprobs' (bool) and 'top_logprobs' (0..20); completions: 'logprobs' (0..5) sets both.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Loom's own fields: 'speculation' ("none", "lookup", or "draft": the server's --spec
  // drafter) and 'draft_max' (1..64); empty / 0: the server's defaults.
  std::string speculation;
  int32_t draft_max = 0;
  // response_format json_object / json_schema: the grammar every choice is constrained by
  // (compiled while parsing, so an unsupported schema feature is a 400 naming it).
  std::shared_ptr<const text::constrain::CompiledGrammar> grammar;
};

struct ChatRequest {
  Generation gen;
  // Checked and normalized (tool_protocol.cpp): {role (developer read as system), content
  // (text parts joined; null only on an assistant tool-call turn sent without it),
  // tool_calls?, tool_call_id?, name?}.
  nlohmann::ordered_json messages;
  text::tools::ToolRequest tools;  // tools, tool_choice, parallel_tool_calls
};

struct CompletionRequest {
  Generation gen;
  std::string prompt;
  bool echo = false;
};

// Parse a body (already known to be JSON text). Throws ApiError(400) naming the field.
ChatRequest parse_chat(const std::string& body, const Limits& lim);
CompletionRequest parse_completion(const std::string& body, const Limits& lim);
nlohmann::json parse_body(const std::string& body);  // 400 on invalid JSON / UTF-8 / nesting
// The chat body's tool fields and messages (tool_protocol.cpp), from the body read in its
// written key order.
text::tools::ToolRequest parse_tools(const nlohmann::ordered_json& body);
nlohmann::ordered_json parse_messages(const nlohmann::ordered_json& body, const Limits& lim);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  nlohmann::json json() const;
};

// One generated token as a reply's logprobs report it. Its text is the token's piece: raw
// bytes, possibly an incomplete UTF-8 sequence (the JSON 'token' string shows such bytes as
// U+FFFD; 'bytes' lists them as they are).
struct TokenReport {
  std::string piece;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // the most likely tokens' pieces, most likely first
  int64_t text_offset = 0;  // code points of generated text before this token (token_aligner.h)
};

// "stop" | "length" (OpenAI's finish reasons) from the engine's.
struct Choice {
  std::string text;
  std::string finish_reason;  // "stop", "length", "tool_calls"
  bool logprobs = false;      // the request asked: reply with `tokens` (else "logprobs": null)
  std::vector<TokenReport> tokens;
  std::vector<text::tools::Call> calls;  // chat replies that called tools
};

// The 'logprobs' object of a chat choice ({"content": [...]}) and of a completion choice
// ({"tokens", "token_logprobs", "top_logprobs", "text_offset"}; each top_logprobs dict holds the
// top tokens and the sampled one, OpenAI's "up to logprobs + 1"). `offset` is added to every
// text_offset (the code points of an echoed prompt).
nlohmann::json chat_logprobs(const std::vector<TokenReport>& tokens);
nlohmann::json completion_logprobs(const std::vector<TokenReport>& tokens, int64_t offset);

nlohmann::json chat_response(const std::string& id, const std::string& model, int64_t created,
                             const std::vector<Choice>& choices, const Usage& u);
nlohmann::json completion_response(const std::string& id, const std::string& model, int64_t created,
                                   const std::vector<Choice>& choices, const Usage& u);
// One streamed chunk: a delta of `text` for choice `index` (role on the first chunk of a chat
// choice), or its finish reason when finish_reason is set; usage chunks have no choices.
// `logprobs`: the choice's logprobs object for the tokens this chunk sends (null when absent).
nlohmann::json chat_chunk(const std::string& id, const std::string& model, int64_t created, int index,
                          const std::string* role, const std::string& text, const std::string* finish_reason,
                          const nlohmann::json* logprobs = nullptr);
nlohmann::json completion_chunk(const std::string& id, const std::string& model, int64_t created, int index,
                                const std::string& text, const std::string* finish_reason,
                                const nlohmann::json* logprobs = nullptr);
// The stream chunks of a choice's tool calls, OpenAI's shape: per call, one chunk with its
// index, id, type and name (arguments ""), then its arguments in fragments.
// `first`: the index of calls[0] among the choice's calls.
std::vector<nlohmann::json> tool_call_chunks(const std::string& id, const std::string& model, int64_t created,
                                             int index, const std::vector<text::tools::Call>& calls, size_t first);
nlohmann::json usage_chunk(const std::string& id, const std::string& object, const std::string& model, int64_t created,
                           const Usage& u);

}  // namespace loom::serve
