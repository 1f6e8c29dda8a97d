// The prompt side of tool calling: a request's conversation (OpenAI-shaped messages, already
// checked by the server) turned into what the chat template renders, and the grammar the
// reply is held to.
//
// Native formats (tool_call.h) hand the template `tools`, assistant `tool_calls` (arguments as
// objects: the families' templates write them with `tojson`) and `tool` messages as they are.
// The generic format describes the tools in a system-prompt section and asks for one JSON
// object, {"tool_calls": [{"name", "arguments"}]} or {"response": "..."}; a past call is
// rendered as that object and tool results as a user turn of {"tool_response": ...} lines, so
// any template (SmolLM2's, Gemma's) renders the conversation.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/tools/tool_call.h"

namespace loom::text::tools {

// `messages`: each {role, content (string or null), tool_calls?: [{id, type, function: {name,
// arguments (JSON object text)}}], tool_call_id?, name?}.
ChatRequest tool_conversation(Format f, const nlohmann::ordered_json& messages, const ToolRequest& tr);

// The generic format's system-prompt section for these tools and this tool_choice.
std::string generic_instructions(const ToolRequest& tr);

// The JSON Schema of the generic reply: the tool_calls object (arguments = each function's
// parameters, anyOf over the callable functions; at most one call without parallel calls),
// or, with tool_choice auto, that or {"response": string}.
nlohmann::ordered_json generic_reply_schema(const ToolRequest& tr);

// The GBNF the reply must match, or "" when the reply is free (native formats under
// tool_choice auto; tool_choice none). Throws loom::Error when a parameters schema cannot be
// compiled (the server checks each tool first, to name it).
std::string reply_grammar(Format f, const ToolRequest& tr);

}  // namespace loom::text::tools
