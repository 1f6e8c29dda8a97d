// The host half of launch.cuh (plain C++, for the plan's .cpp files): whether launch() asks
// for programmatic dependent launch. The plan sets it for its steps from the
// `programmatic_launch` schedule key (on devices of compute capability 9.0 and later); kernel
// tests leave it off unless they test it. Per thread: a plan runs its steps on one.
#pragma once

namespace loom::backend::cuda {

inline bool& programmatic_launch() {
  thread_local bool on = false;
  return on;
}

}  // namespace loom::backend::cuda
