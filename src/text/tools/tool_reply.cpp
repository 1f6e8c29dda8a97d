#include "text/tools/tool_reply.h"

#include <algorithm>
#include <utility>

namespace loom::text::tools {

using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kHermesOpen = "<tool_call>";
constexpr const char* kHermesClose = "</tool_call>";
constexpr const char* kMistral = "[TOOL_CALLS]";
constexpr const char* kPythonTag = "<|python_tag|>";

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`: bytes that
// must wait, since the next piece may complete the marker.
size_t partial_marker(const std::string& s, const std::string& marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, marker, 0, n) == 0) return n;
  return 0;
}

bool parse(const std::string& text, ojson& out) {
  try {
    out = ojson::parse(text);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

ReplyParser::ReplyParser(Format f, const ToolRequest& tr)
    : f_(f), active_(tr.active()),
      constrained_whole_(f == Format::generic || tr.choice != ChoiceMode::automatic),
      parallel_(tr.parallel) {
  for (const Function* fn : tr.callable()) names_.push_back(fn->name);
}

ReplyDelta ReplyParser::push(const std::string& text) {
  ReplyDelta out;
  if (!active_) {
    out.content = text;
    return out;
  }
  held_ += text;
  if (!holding_ && !constrained_whole_) {
    if (f_ == Format::llama3) {
      if (!content_) {
        const size_t a = held_.find_first_not_of(" \t\r\n");
        if (a == std::string::npos) return out;  // only blank so far: undecided
        const std::string t = held_.substr(a);
        const std::string tag = kPythonTag;
        if (t[0] == '{' || t.rfind(tag, 0) == 0) holding_ = true;
        else if (t.size() < tag.size() && tag.compare(0, t.size(), t) == 0) return out;  // maybe the tag
        else content_ = true;
      }
      if (content_) out.content = std::exchange(held_, "");
      return out;
    }
    const std::string marker = f_ == Format::hermes ? kHermesOpen : kMistral;
    if (const size_t pos = held_.find(marker); pos != std::string::npos) {
      out.content = held_.substr(0, pos);
      held_.erase(0, pos);
      holding_ = true;
    } else {
      const size_t keep = partial_marker(held_, marker);
      out.content = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
  }
  scan(false, out);
  return out;
}

bool ReplyParser::call_from(const ojson& j, std::vector<Call>& out) const {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const std::string name = j["name"];
  if (std::find(names_.begin(), names_.end(), name) == names_.end()) return false;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key)) return false;
  ojson args = j[key];
  if (args.is_string() && !parse(args.get<std::string>(), args)) return false;  // some models quote them
  if (!args.is_object()) return false;
  out.push_back({new_call_id(f_), name, args.dump()});
  return true;
}

void ReplyParser::take(const std::string& text, ReplyDelta& out) {
  if (failed_) return;
  ojson j;
  std::vector<Call> one;
  if (!parse(trim(text), j) || !call_from(j, one)) {
    failed_ = true;
    return;
  }
  if (!parallel_ && emitted_ >= 1) return;  // parallel_tool_calls false: the first call only
  ++emitted_;
  out.calls.push_back(std::move(one[0]));
}

// Objects at `element_depth` (the calls array's items) are given out as each one closes.
void ReplyParser::scan_json_elements(int element_depth, ReplyDelta& out) {
  for (; scanned_ < held_.size() && !failed_; ++scanned_) {
    const char c = held_[scanned_];
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (c == '{' && depth_ == element_depth) element_ = scanned_;
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
      if (c == '}' && depth_ == element_depth && element_ != std::string::npos) {
        take(held_.substr(element_, scanned_ + 1 - element_), out);
        element_ = std::string::npos;
      }
    }
  }
}

void ReplyParser::scan(bool at_end, ReplyDelta& out) {
  switch (f_) {
    case Format::generic:  // {"tool_calls": [ {call}, ... ]}: calls at depth 2
      scan_json_elements(2, out);
      break;
    case Format::mistral:  // [TOOL_CALLS][ {call}, ... ]: calls at depth 1 after the marker
      if (scanned_ == 0) {
        const size_t at = held_.find(kMistral);
        if (at == std::string::npos) break;
        scanned_ = at + std::string(kMistral).size();
      }
      scan_json_elements(1, out);
      break;
    case Format::hermes:
      while (!failed_) {
        const size_t open = held_.find(kHermesOpen, consumed_);
        if (open == std::string::npos) break;
        const size_t body = open + std::string(kHermesOpen).size();
        const size_t close = held_.find(kHermesClose, body);
        if (close == std::string::npos && !at_end) break;  // the block is still coming
        take(held_.substr(body, close == std::string::npos ? std::string::npos : close - body), out);
        consumed_ = close == std::string::npos ? held_.size() : close + std::string(kHermesClose).size();
      }
      break;
    case Format::llama3:  // one object, whole only at the end
      if (at_end) {
        std::string t = trim(held_);
        if (t.rfind(kPythonTag, 0) == 0) t = t.substr(std::string(kPythonTag).size());
        take(t, out);
      }
      break;
  }
}

ReplyDelta ReplyParser::finish() {
  ReplyDelta out;
  if (!active_) return out;
  if (holding_ || constrained_whole_ || f_ == Format::llama3) scan(true, out);
  if (emitted_ == 0) {
    // No call: a generic {"response": …} reply is its text; anything else is shown as it came.
    ojson j;
    if (f_ == Format::generic && parse(held_, j) && j.is_object() && j.contains("response") && j["response"].is_string())
      out.content = j["response"].get<std::string>();
    else
      out.content = held_;
  }
  held_.clear();
  return out;
}

}  // namespace loom::text::tools
