// loom bench --spec: decode speed with each drafter against plain decoding on one real prompt.
#pragma once
#include <string>
#include <vector>

namespace loom::cli {

struct SpecBenchArgs {
  std::string model, gguf, backend = "cpu", kv_type = "f16";
  std::vector<std::string> drafters;  // --spec, comma-separated: lookup, draft:PATH, layers:K
  std::string prompt, prompt_file;
  bool chat = false;
  int tokens = 128, reps = 5, warmup = 1, threads = 0, draft_max = 7;  // runtime::spec::Speculation::kDefaultDraftMax
  bool as_json = false, quiet = false;
};

void run_spec_bench(const SpecBenchArgs& a);

}  // namespace loom::cli
