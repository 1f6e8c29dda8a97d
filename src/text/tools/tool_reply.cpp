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

std::string ReplyParser::push(const std::string& text) {
  if (!active_) return text;
  held_ += text;
  if (holding_ || constrained_whole_) return "";
  if (f_ == Format::llama3) {
    if (!content_) {
      const size_t a = held_.find_first_not_of(" \t\r\n");
      if (a == std::string::npos) return "";  // only blank so far: undecided
      const std::string t = held_.substr(a);
      const std::string tag = kPythonTag;
      if (t[0] == '{' || t.rfind(tag, 0) == 0) {
        holding_ = true;
        return "";
      }
      if (t.size() < tag.size() && tag.compare(0, t.size(), t) == 0) return "";  // maybe the tag
      content_ = true;
    }
    return std::exchange(held_, "");
  }
  const std::string marker = f_ == Format::hermes ? kHermesOpen : kMistral;
  if (const size_t pos = held_.find(marker); pos != std::string::npos) {
    std::string out = held_.substr(0, pos);
    held_.erase(0, pos);
    holding_ = true;
    return out;
  }
  const size_t keep = partial_marker(held_, marker);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
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

std::vector<Call> ReplyParser::parse_calls(const std::string& held) const {
  std::vector<Call> calls;
  ojson j;
  switch (f_) {
    case Format::generic:
      if (!parse(held, j) || !j.is_object() || !j.contains("tool_calls") || !j["tool_calls"].is_array()) return {};
      for (const auto& c : j["tool_calls"])
        if (!call_from(c, calls)) return {};
      break;
    case Format::hermes: {
      size_t at = 0;
      while ((at = held.find(kHermesOpen, at)) != std::string::npos) {
        at += std::string(kHermesOpen).size();
        size_t end = held.find(kHermesClose, at);
        const std::string body = trim(held.substr(at, end == std::string::npos ? std::string::npos : end - at));
        if (!parse(body, j) || !call_from(j, calls)) return {};
        if (end == std::string::npos) break;
        at = end;
      }
      break;
    }
    case Format::mistral: {
      const size_t at = held.find(kMistral);
      if (at == std::string::npos || !parse(trim(held.substr(at + std::string(kMistral).size())), j) || !j.is_array())
        return {};
      for (const auto& c : j)
        if (!call_from(c, calls)) return {};
      break;
    }
    case Format::llama3: {
      std::string t = trim(held);
      if (t.rfind(kPythonTag, 0) == 0) t = trim(t.substr(std::string(kPythonTag).size()));
      if (!parse(t, j) || !call_from(j, calls)) return {};
      break;
    }
  }
  if (!parallel_ && calls.size() > 1) calls.resize(1);
  return calls;
}

ReplyEnd ReplyParser::finish() {
  ReplyEnd end;
  end.calls = active_ ? parse_calls(held_) : std::vector<Call>{};
  if (end.calls.empty()) {
    // Generic: a {"response": …} reply is its text; anything else is shown as it came.
    ojson j;
    if (active_ && f_ == Format::generic && parse(held_, j) && j.is_object() && j.contains("response") &&
        j["response"].is_string())
      end.content = j["response"].get<std::string>();
    else
      end.content = held_;
  }
  held_.clear();
  return end;
}

}  // namespace loom::text::tools
