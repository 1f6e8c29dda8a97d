// `loom perplexity -m FILE -f text.txt -c 512`: llama-perplexity's measure. The text is
// tokenized once (with BOS when the vocabulary adds one) and cut into chunks of n_ctx; each
// chunk runs from an empty cache with its first token replaced by BOS (when added), and the
// predictions of positions n_ctx/2 .. n_ctx-2 are scored, so figures compare one to one.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "backend/registry.h"
#include "cli/verb.h"
#include "common/error.h"
#include "runtime/model_bundle.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

namespace loom::cli {

std::vector<int32_t> read_token_file(const std::string& path);  // logits.cpp

namespace {

struct PerplexityArgs {
  std::string model, gguf, text, tokens, json;
  int32_t n_ctx = 512;
  int chunks = -1;
  std::string backend = "cpu";
  int threads = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) loom::fail("cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run_perplexity(const PerplexityArgs& a) {
  if (a.text.empty() == a.tokens.empty()) loom::fail("give exactly one of -f TEXT and --tokens IDS");
  if (a.n_ctx < 4) loom::fail("-c must be at least 4, got {}", a.n_ctx);
  const auto bundle = runtime::ModelBundle::load(a.model, a.gguf, a.n_ctx);
  const auto& vocab = bundle.tokenizer().vocab();
  std::vector<int32_t> toks;
  if (!a.tokens.empty()) {
    toks = read_token_file(a.tokens);
  } else {
    toks = bundle.encode(read_text(a.text), /*add_bos=*/true, /*parse_special=*/false);
  }
  int chunks = int(toks.size() / size_t(a.n_ctx));
  if (a.chunks >= 0) chunks = std::min(chunks, a.chunks);
  if (chunks < 1)
    loom::fail("{} tokens: need at least n_ctx = {} for one chunk (llama-perplexity needs 2 x n_ctx)", toks.size(),
               a.n_ctx);
  runtime::RunOptions ro;
  ro.backend = a.backend;
  ro.threads = a.threads;
  ro.n_ctx = a.n_ctx;
  auto engine = bundle.open_engine(ro);
  const size_t V = size_t(engine->vocab_size());
  const int first = a.n_ctx / 2;
  std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, scoring positions %d..%d, BOS %s\n", toks.size(),
               chunks, a.n_ctx, first, a.n_ctx - 2, vocab.add_bos ? "added" : "not added");
  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  long scored = 0;
  for (int c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(toks.begin() + size_t(c) * a.n_ctx, toks.begin() + size_t(c + 1) * a.n_ctx);
    if (vocab.add_bos && vocab.bos >= 0) chunk[0] = vocab.bos;
    const auto logits = engine->evaluate(chunk, size_t(first));  // each chunk from an empty cache
    for (int j = first; j < a.n_ctx - 1; ++j) {
      const float* row = logits.data() + size_t(j - first) * V;
      const int32_t target = toks[size_t(c) * a.n_ctx + j + 1];
      if (target < 0 || size_t(target) >= V) loom::fail("token id {} outside the vocabulary", target);
      float mx = row[0];
      for (size_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      nll += -(double(row[target]) - mx - std::log(sum));
      ++scored;
    }
    std::fprintf(stderr, "[%d]%.4f,", c + 1, std::exp(nll / double(scored)));
    std::fflush(stderr);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ppl = std::exp(nll / double(scored));
  std::fprintf(stderr, "\n");
  std::printf("Final estimate: PPL = %.4f (%ld tokens scored, %d chunks, %.1f s)\n", ppl, scored, chunks, secs);
  if (!a.json.empty()) {
    FILE* f = std::fopen(a.json.c_str(), "w");
    if (!f) loom::fail("cannot write {}", a.json);
    std::fprintf(f, "{\"ppl\": %.17g, \"scored\": %ld, \"chunks\": %d, \"n_ctx\": %d, \"tokens\": %zu, \"seconds\": %.3f}\n",
                 ppl, scored, chunks, a.n_ctx, toks.size(), secs);
    std::fclose(f);
  }
}

const RegisterVerb reg("perplexity", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("perplexity", "Perplexity over a text, computed as llama-perplexity does");
  auto a = std::make_shared<PerplexityArgs>();
  cmd->add_option("-m,--model", a->model, "model .gguf or .loom")->required();
  cmd->add_option("--gguf", a->gguf, "weights for a .loom program");
  cmd->add_option("-f,--file", a->text, "text file");
  cmd->add_option("--tokens", a->tokens, "file of token ids instead of a text (BOS included as wanted)");
  cmd->add_option("-c,--ctx-size", a->n_ctx, "chunk length")->capture_default_str();
  cmd->add_option("--chunks", a->chunks, "at most this many chunks (-1: all)");
  cmd->add_option("--json", a->json, "also write the figures to this JSON file");
  cmd->add_option("-t,--threads", a->threads, "threads (0: all)");
  add_backend_option(*cmd, a->backend);
  cmd->callback([a] { run_perplexity(*a); });
});

}  // namespace
}  // namespace loom::cli
