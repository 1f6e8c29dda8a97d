#include "serve/token_aligner.h"

namespace loom::serve {

void TokenAligner::event(const TokenReport* token, const std::string& text) {
  if (token) {
    pending_.push_back({*token, decoded_, std::string::npos});
    pending_.back().report.text_offset = int64_t(decoded_chars_);
  }
  if (text.empty()) return;  // a character still incomplete: its tokens wait for the rest
  decoded_ += text.size();
  for (unsigned char c : text) decoded_chars_ += (c & 0xC0) != 0x80;
  for (auto it = pending_.rbegin(); it != pending_.rend() && it->end == std::string::npos; ++it) it->end = decoded_;
}

std::vector<TokenReport> TokenAligner::release(size_t sent) {
  std::vector<TokenReport> out;
  while (!pending_.empty() && pending_.front().end != std::string::npos && pending_.front().end <= sent) {
    out.push_back(std::move(pending_.front().report));
    pending_.pop_front();
  }
  return out;
}

std::vector<TokenReport> TokenAligner::finish(size_t sent, bool by_stop) {
  std::vector<TokenReport> out;
  for (auto& p : pending_)
    if (!by_stop || p.start < sent) out.push_back(std::move(p.report));
  pending_.clear();
  return out;
}

}  // namespace loom::serve
