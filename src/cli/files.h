// Whole files in and out for the verbs; errors name the path.
#pragma once
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace loom::cli {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) loom::fail("cannot open {}", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path`, or to standard output when `path` is empty or "-" (then false).
inline bool write_file_or_stdout(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return false;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) loom::fail("cannot write {}", path);
  out << text;
  out.close();
  if (!out) loom::fail("writing {} failed", path);
  return true;
}

}  // namespace loom::cli
