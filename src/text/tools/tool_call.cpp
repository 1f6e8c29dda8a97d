#include "text/tools/tool_call.h"

#include <atomic>
#include <chrono>
#include <random>

namespace loom::text::tools {

std::vector<const Function*> ToolRequest::callable() const {
  std::vector<const Function*> out;
  for (const Function& f : functions)
    if (choice != ChoiceMode::named || f.name == named) out.push_back(&f);
  return out;
}

Format detect_format(const std::string& src) {
  // Each marker is what the family's template writes for an assistant's call (or, for Llama
  // 3.x, the instruction its tool section gives), so a template that merely mentions tools
  // in prose is not taken for one.
  if (src.find("<tool_call>") != std::string::npos) return Format::hermes;
  if (src.find("[TOOL_CALLS]") != std::string::npos) return Format::mistral;
  if (src.find("<|start_header_id|>") != std::string::npos &&
      src.find("\"parameters\": dictionary of argument name") != std::string::npos)
    return Format::llama3;
  return Format::generic;
}

const char* format_name(Format f) {
  switch (f) {
    case Format::hermes: return "hermes";
    case Format::llama3: return "llama3";
    case Format::mistral: return "mistral";
    case Format::generic: break;
  }
  return "generic";
}

std::string new_call_id(Format f) {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static std::atomic<uint64_t> counter{0};
  // Random per id (seeded by the clock and a counter) so ids differ across restarts too.
  std::mt19937_64 rng(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                      (++counter * 0x9E3779B97F4A7C15ull) ^ std::random_device{}());
  const int n = f == Format::mistral ? 9 : 24;
  std::string id = f == Format::mistral ? "" : "call_";
  for (int i = 0; i < n; ++i) id += kAlnum[rng() % 62];
  return id;
}

}  // namespace loom::text::tools
