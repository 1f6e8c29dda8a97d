#include "bench/sse.h"

#include <fmt/format.h>

namespace bench {

SseParser::SseParser(OnEvent on_event, size_t max_line) : on_event_(std::move(on_event)), max_line_(max_line) {}

bool SseParser::feed(std::string_view bytes) {
  if (!error_.empty()) return false;
  for (char c : bytes) {
    if (after_cr_) {  // CRLF is one line end, even when the LF comes in the next read
      after_cr_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      if (!line(line_)) return false;
      line_.clear();
      continue;
    }
    line_ += c;
    if (line_.size() > max_line_) {
      error_ = fmt::format("an event-stream line is longer than {} bytes", max_line_);
      return false;
    }
  }
  return true;
}

bool SseParser::line(std::string_view l) {
  if (!started_) {  // a byte order mark may open the stream
    started_ = true;
    if (l.substr(0, 3) == "\xEF\xBB\xBF") l.remove_prefix(3);
  }
  if (l.empty()) {  // dispatch
    if (!has_data_) return true;
    std::string data;
    data.swap(data_);
    has_data_ = false;
    if (!on_event_(data)) {
      error_ = "stopped by the event handler";
      return false;
    }
    return true;
  }
  if (l[0] == ':') return true;  // a comment
  const size_t colon = l.find(':');
  const std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field != "data") return true;  // event, id, retry: nothing a completion stream needs
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  if (data_.size() > max_line_) {
    error_ = fmt::format("an event's data is longer than {} bytes", max_line_);
    return false;
  }
  return true;
}

}  // namespace bench
