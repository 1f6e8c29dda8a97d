// `loom synth SHAPE OUT.gguf`: a random-weight GGUF of a real model's shape, for tests that need
// the layout of a model without its weights.
#include <fmt/format.h>

#include "cli/verb.h"
#include "common/error.h"
#include "quant/mixture.h"
#include "synth/model.h"

namespace {

loom::cli::RegisterVerb reg("synth", [](CLI::App& root) {
  struct Opts {
    std::string shape, out, type = "f16";
    uint64_t seed = 0;
    uint32_t vocab = 0, layers = 0;
    double gain = 0;
    bool list = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = root.add_subcommand("synth", "Write a random-weight GGUF model of a named shape");
  c->add_option("SHAPE", o->shape, "model shape (--list shows them)");
  c->add_option("OUT", o->out, "output .gguf path");
  c->add_option("--seed", o->seed, "random seed (same seed, same file)");
  c->add_option("--type", o->type,
                 "weight type of the matrices: f16 (default), f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (a normal draw "
                 "quantized), q4_K, q5_K, q6_K (random codes); or a llama-quantize file type such as Q4_K_M (its "
                 "per-tensor mixture, k-quants as random codes: seconds where f16 + `loom quantize` take minutes)");
  c->add_option("--vocab", o->vocab, "vocabulary size (overrides the shape's)");
  c->add_option("--layers", o->layers, "layer count (overrides the shape's)");
  c->add_option("--gain", o->gain,
                 "the layers' matrices drawn with std gain / sqrt(row length), capped at 0.02 (default 0: std 0.02 "
                 "everywhere)")
      ->check(CLI::Range(0.0, 16.0));
  c->add_flag("--list", o->list, "list the known shapes");
  c->callback([o] {
    if (o->list) {
      for (const auto& n : loom::synth::shape_names()) fmt::print("{}\n", n);
      return;
    }
    if (o->shape.empty() || o->out.empty()) loom::fail("synth: needs SHAPE and OUT (see loom synth --help)");
    auto shape = loom::synth::find_shape(o->shape);
    loom::synth::SynthOptions opt;
    opt.seed = o->seed;
    if (auto t = gguf::type_from_name(o->type)) opt.type = *t;
    else if (auto f = loom::quant::file_type_from_name(o->type)) opt.file_type = *f;
    else loom::fail("synth: unknown --type '{}' (a weight type such as f16 or q4_K, or a file type such as Q4_K_M)", o->type);
    if (o->vocab) opt.n_vocab = o->vocab;
    if (o->layers) opt.n_layer = o->layers;
    opt.gain = o->gain;
    auto r = loom::synth::write_model(shape, opt, o->out);
    fmt::print("wrote {}: {} ({}), {} tensors, {:.1f} M params, {:.1f} MiB of tensor data\n", o->out, o->shape,
               o->type, r.tensors, double(r.params) / 1e6, double(r.bytes) / (1 << 20));
  });
});

}  // namespace
