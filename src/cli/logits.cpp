// `loom logits -m FILE --tokens ids.txt --out logits.f32`: teacher-forced logits of every
// position, float32 [n_tokens x n_vocab] row-major — what the correctness tests compare with
// llama.cpp. Token ids are whitespace- or comma-separated integers.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "backend/registry.h"
#include "cli/verb.h"
#include "common/error.h"
#include "runtime/model_bundle.h"

namespace loom::cli {

std::vector<int32_t> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) loom::fail("cannot open token file {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  for (char& c : text)
    if (c == ',' || c == '[' || c == ']') c = ' ';
  std::istringstream is(text);
  std::vector<int32_t> ids;
  std::string word;
  while (is >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (...) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX) loom::fail("{}: \"{}\" is not a token id", path, word);
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) loom::fail("{}: no token ids", path);
  return ids;
}

namespace {

struct LogitsArgs {
  std::string model, gguf, tokens, out;
  std::string backend = "cpu", kv_type = "f16";
  std::string dump_dir;
  int threads = 0;
  int batch = 0;
  int sequences = 1;
};

void run_logits(const LogitsArgs& a) {
  const auto ids = read_token_file(a.tokens);
  auto bundle = runtime::ModelBundle::load(a.model, a.gguf, int64_t(ids.size()));
  if (!a.dump_dir.empty()) {  // the schedule's diagnosis key, so the plan records it
    auto& schedule = bundle.model().module.schedule;
    std::erase_if(schedule, [](const ir::ScheduleEntry& e) {
      return e.opcode.empty() && e.settings.size() == 1 && e.settings[0].name == "dump_dir";
    });
    schedule.push_back({"", "", {{"dump_dir", a.dump_dir}}, {}});
  }
  runtime::RunOptions ro;
  ro.backend = a.backend;
  ro.threads = a.threads;
  ro.kv_elem = backend::parse_kv_elem(a.kv_type);
  ro.n_ctx = int32_t(ids.size());
  if (a.batch > 0) ro.n_batch = a.batch;
  if (a.sequences > 1) ro.max_seqs = a.sequences;  // a pool for every part
  auto engine = bundle.open_engine(ro);
  const auto logits = a.sequences > 1 ? engine->evaluate_side_by_side(ids, a.sequences) : engine->evaluate(ids);
  FILE* f = std::fopen(a.out.c_str(), "wb");
  if (!f) loom::fail("cannot write {}", a.out);
  const size_t n = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  if (std::fclose(f) != 0 || n != logits.size()) loom::fail("short write to {}", a.out);
  std::fprintf(stderr, "logits: %zu tokens x %lld vocab -> %s\n", ids.size(), (long long)engine->vocab_size(),
               a.out.c_str());
}

const RegisterVerb reg("logits", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("logits", "Teacher-forced logits of every position, float32 [tokens x vocab]");
  auto a = std::make_shared<LogitsArgs>();
  cmd->add_option("-m,--model", a->model, "model .gguf or .loom")->required();
  cmd->add_option("--gguf", a->gguf, "weights for a .loom program");
  cmd->add_option("--tokens", a->tokens, "file of token ids")->required();
  cmd->add_option("-b,--batch", a->batch, "tokens per forward pass (0: the default); 1 runs one decode step per token")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--sequences", a->sequences,
                  "cut the tokens into this many parts, each a fresh sequence, whose rows share steps as a server's "
                  "do (one row of the first part, a chunk of each other a step); rows in the file's order")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", a->out, "output file")->required();
  cmd->add_option("-t,--threads", a->threads, "threads (0: all)");
  add_backend_option(*cmd, a->backend);
  cmd->add_option("--dump-dir", a->dump_dir,
                  "write every op's result as DIR/<value>.f32 (sets the schedule's dump_dir; the fast backend skips "
                  "matmul results)");
  cmd->add_option("--kv-type", a->kv_type, "KV cache storage: f16, f32 or q8_0 (llama.cpp's -ctk/-ctv)")->capture_default_str();
  cmd->callback([a] { run_logits(*a); });
});

}  // namespace
}  // namespace loom::cli
