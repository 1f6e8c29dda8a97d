// The reply side of tool calling: a model's generated text, as it streams, split into the
// content a client may see now and the tool calls it holds, in the request's format.
//
// Streaming and whole replies go through the same parser (push() for every piece, then
// finish()), so the streamed deltas reassemble into exactly the non-streamed message. Text
// that may begin a call (from a marker on, or the whole reply where the format is one JSON
// document) is held back until the end and parsed then.
#pragma once
#include <string>
#include <vector>

#include "text/tools/tool_call.h"

namespace loom::text::tools {

struct ReplyEnd {
  std::string content;     // content not yet returned by push()
  std::vector<Call> calls; // in order; empty when the reply called nothing
};

class ReplyParser {
 public:
  ReplyParser(Format f, const ToolRequest& tr);
  std::string push(const std::string& text);  // content that can be shown now
  ReplyEnd finish();

 private:
  std::vector<Call> parse_calls(const std::string& held) const;
  bool call_from(const nlohmann::ordered_json& j, std::vector<Call>& out) const;

  Format f_;
  bool active_, constrained_whole_, parallel_;
  std::vector<std::string> names_;  // callable functions
  std::string held_;
  bool holding_ = false;  // a call may have begun: the rest waits for finish()
  bool content_ = false;  // Llama 3.x: the reply has shown itself to be text
};

}  // namespace loom::text::tools
