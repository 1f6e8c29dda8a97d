// Errors are values with context: every failure names the file, tensor, field or offset.
// Library code throws loom::Error; the CLI and HTTP edges catch it and report it.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace loom
