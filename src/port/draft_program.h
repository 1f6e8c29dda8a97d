// A draft program derived from a target program, for speculative decoding: the target's
// first K decoder layers, then its own head (final norm and output projection, the weights
// shared with the target), i.e. an early exit. It is a rewrite of the ir::Module — the ops of
// layers K.. are dropped and the head reads layer K-1's output — so the draft is a readable,
// verifiable `.loom` program like any other (`loom draft MODEL --layers K -o draft.loom`), and
// binds to the target's GGUF.
#pragma once
#include <cstdint>

#include "ir/module.h"

namespace port {

// Layers are recognised by the porters' value names (`%b<L>.<name>`, blocks.h). Throws
// loom::Error when the program has no such layers or `layers` is not in [1, n_layer - 1].
ir::Module draft_program(const ir::Module& target, int64_t layers);

}  // namespace port
