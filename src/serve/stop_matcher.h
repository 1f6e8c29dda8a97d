// Stop sequences over streamed text: text is released only once it can no longer be the start
// of a stop sequence, and generation ends at the first complete one (which is not returned).
#pragma once
#include <string>
#include <vector>

namespace loom::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds generated text; returns what is now safe to send. After a stop sequence completes,
  // stopped() is true and the text from it on is dropped.
  std::string push(const std::string& piece);
  std::string flush();  // the end of generation: whatever was held back
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace loom::serve
