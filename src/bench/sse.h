// Server-sent events (the WHATWG event-stream format) as an OpenAI-compatible server streams
// them: bytes arrive in arbitrary pieces, an event's `data:` lines end at a blank line. The
// parser owes nothing to how the bytes were split: a line or a CRLF cut across two reads, a UTF-8
// byte order mark, comments (`: keep-alive`), other fields and several data lines per event
// all come out the same as if the stream had arrived in one piece.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace bench {

class SseParser {
 public:
  // Called with each complete event's data (its data lines joined by '\n'); an event without
  // data lines is not reported. Returning false stops the parse (feed() returns false).
  using OnEvent = std::function<bool(const std::string& data)>;

  // A line longer than max_line bytes is an error (a hostile or broken server would otherwise
  // grow the buffer without bound).
  explicit SseParser(OnEvent on_event, size_t max_line = size_t(16) << 20);

  // Feeds the next bytes. Returns false when on_event asked to stop or a line exceeded the
  // limit (error() says which).
  bool feed(std::string_view bytes);
  // The stream ended: an event still waiting for its blank line is dropped, as the format says.
  // Returns true when nothing was left half-read.
  bool finish() const { return line_.empty() && data_.empty() && !has_data_; }
  const std::string& error() const { return error_; }

 private:
  bool line(std::string_view l);

  OnEvent on_event_;
  size_t max_line_;
  std::string line_, data_, error_;
  bool has_data_ = false, after_cr_ = false, started_ = false;
};

}  // namespace bench
