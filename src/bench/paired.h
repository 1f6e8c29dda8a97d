// The one paired-measurement loop (docs/architecture.md): two arms interleaved A B A B …, the
// same input for both arms of a round (the round number picks it), warm-up rounds discarded.
// `loom bench --vs` (A = Loom, B = the peer) and `loom tune`'s timing gate (A = the session's
// current program, B = the candidate) both run it, and both take the CI from paired_ratio().
#pragma once
#include <functional>
#include <vector>

#include "bench/stats.h"

namespace bench {

// One measurement of an arm in round `round` (warm-up rounds are negative); returns a rate,
// higher is better (tokens/s). `warm` says the value will be discarded.
using PairedArm = std::function<double(int round, bool warm)>;

struct PairedRun {
  std::vector<double> a, b;  // one value per counted round
};

// Runs `warmup` + `pairs` rounds; in each, `a` and `b` (when set), `a` first in even rounds and
// `b` first in odd ones (round numbers as above), so neither arm always runs second; each run
// starts after a pause that outlasts the CPU pool's spinning workers (paired.cpp). Progress:
// called before each round with (round, total rounds) when set.
PairedRun run_paired(int warmup, int pairs, const PairedArm& a, const PairedArm& b,
                     const std::function<void(int, int)>& progress = {});

}  // namespace bench
