// The reply side of tool calling: a model's generated text, as it streams, split into the
// content a client may see now and the tool calls it holds, in the request's format.
//
// Streaming and whole replies go through the same parser (push() for every piece, then
// finish()), so the streamed deltas reassemble into exactly the non-streamed message. Text
// that may begin a call (from a marker on, or the whole reply where the format is one JSON
// document) is held back; each call is given out as soon as its text is complete (a closed
// `</tool_call>` block, a closed object in the calls array), Llama's single object at the end.
// A call that does not parse (unknown name, arguments not an object) ends the calls: with none
// before it the whole reply is content, else the text from it on is dropped.
#pragma once
#include <string>
#include <vector>

#include "text/tools/tool_call.h"

namespace loom::text::tools {

struct ReplyDelta {
  std::string content;      // text that can be shown now
  std::vector<Call> calls;  // calls complete now, in order
};

class ReplyParser {
 public:
  ReplyParser(Format f, const ToolRequest& tr);
  ReplyDelta push(const std::string& text);
  ReplyDelta finish();  // the rest, at the end of the reply

 private:
  void scan(bool at_end, ReplyDelta& out);
  void scan_json_elements(int element_depth, ReplyDelta& out);
  void take(const std::string& text, ReplyDelta& out);  // one call's JSON text
  bool call_from(const nlohmann::ordered_json& j, std::vector<Call>& out) const;

  Format f_;
  bool active_, constrained_whole_, parallel_;
  std::vector<std::string> names_;  // callable functions
  std::string held_;       // text not shown as content: from where a call may begin
  bool holding_ = false;   // a call may have begun: held_ is scanned for calls
  bool content_ = false;   // Llama 3.x: the reply has shown itself to be text
  bool failed_ = false;    // a call did not parse: no more calls
  size_t emitted_ = 0;     // calls given out
  size_t consumed_ = 0;    // Hermes: bytes of held_ already read as blocks
  // The JSON scanner (generic, Mistral): how far it read, nesting depth, string state, and
  // where the element being read began.
  size_t scanned_ = 0, element_ = std::string::npos;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace loom::text::tools
