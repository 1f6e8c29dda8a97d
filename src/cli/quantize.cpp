// loom quantize IN.gguf OUT.gguf --type Q4_K_M: llama-quantize's mixtures (no imatrix).
#include <cstdio>
#include <string>

#include "cli/verb.h"
#include "common/error.h"
#include "quant/model_quantize.h"

namespace {

std::string type_list() {
  std::string s;
  for (const auto& f : loom::quant::file_types()) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

loom::cli::RegisterVerb reg("quantize", [](CLI::App& root) {
  struct Args {
    std::string in, out, type = "Q4_K_M";
    int threads = 2;
  };
  auto args = std::make_shared<Args>();
  auto* c = root.add_subcommand("quantize", "Quantize a GGUF model like llama-quantize (no importance matrix)");
  c->add_option("input", args->in, "input GGUF (F32/F16/BF16 tensors; quantized ones are dequantized first)")->required();
  c->add_option("output", args->out, "output GGUF")->required();
  c->add_option("--type,-t", args->type, "file type: " + type_list())->capture_default_str();
  c->add_option("--threads,-j", args->threads, "worker threads per tensor")->capture_default_str()->check(CLI::Range(1, 1024));
  c->callback([args] {
    auto ft = loom::quant::file_type_from_name(args->type);
    if (!ft) loom::fail("quantize: file type '{}' not supported; choose one of {}", args->type, type_list());
    loom::quant::QuantizeOptions opts{*ft, args->threads, [](const std::string& line) { std::printf("%s\n", line.c_str()); }};
    std::printf("quantize: %s -> %s as %s (general.file_type %u), %d threads\n", args->in.c_str(), args->out.c_str(),
                std::string(ft->name).c_str(), ft->llama_ftype, args->threads);
    const auto s = loom::quant::quantize_model(args->in, args->out, opts);
    std::printf("quantize: %d tensors, %d converted, %d fallbacks, %d requantized; %.2f MiB -> %.2f MiB\n", s.tensors,
                s.quantized, s.fallbacks, s.requantized, s.bytes_in / 1048576.0, s.bytes_out / 1048576.0);
  });
});

}  // namespace
