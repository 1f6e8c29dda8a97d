// `loom synth SHAPE OUT.gguf`: a random-weight GGUF of a real model's shape, for tests that need
// the layout of a model without its weights.
#include <fmt/format.h>

#include "cli/verb.h"
#include "common/error.h"
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
  c->add_option("--type", o->type, "weight type: f16 (default), f32, bf16, q8_0");
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
    auto t = gguf::type_from_name(o->type);
    if (!t) loom::fail("synth: unknown --type '{}'", o->type);
    opt.type = *t;
    if (o->vocab) opt.n_vocab = o->vocab;
    if (o->layers) opt.n_layer = o->layers;
    opt.gain = o->gain;
    auto r = loom::synth::write_model(shape, opt, o->out);
    fmt::print("wrote {}: {} ({}), {} tensors, {:.1f} M params, {:.1f} MiB of tensor data\n", o->out, o->shape,
               o->type, r.tensors, double(r.params) / 1e6, double(r.bytes) / (1 << 20));
  });
});

}  // namespace
