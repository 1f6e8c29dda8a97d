// tests/data/loom/tiny_llama.loom, parsed: 33 ops, op i on line 27 + i, value id of op i = i + 2.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "ir/text.h"

namespace loom::testing {

inline ir::Module tiny_llama() {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/tests/data/loom/tiny_llama.loom";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ir::parse(ss.str(), path);
}

// Op index of the op whose result is `name`.
inline int op_index(const ir::Module& m, const std::string& name) {
  const auto& body = m.find_func("step")->body;
  for (size_t i = 0; i < body.size(); ++i)
    if (body[i].result == name) return int(i);
  return -1;
}

}  // namespace loom::testing
