#include "backend/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/reference.h"
#include "common/error.h"
#ifdef LOOM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace loom::backend {

namespace {
struct Entry {
  const char* name;
  const char* what;
  std::unique_ptr<Backend> (*make)();
};
const Entry kBackends[] = {
    {"cpu", "fast", cpu::make_fast_backend},
    {"cpu-ref", "the reference interpreter", cpu::make_reference_backend},
#ifdef LOOM_HAVE_CUDA
    {"cuda", "NVIDIA GPU", cuda::make_cuda_backend},
#endif
};
}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& e : kBackends) names.push_back(e.name);
  return names;
}

std::string backend_choices() {
  std::string s;
  for (const auto& e : kBackends) s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", e.name, e.what);
  return s;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  for (const auto& e : kBackends)
    if (name == e.name) return e.make();
#ifndef LOOM_HAVE_CUDA
  if (name == "cuda") loom::fail("this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
  loom::fail("unknown backend \"{}\" (known: {})", name, fmt::join(backend_names(), ", "));
}

std::unique_ptr<DeviceMeter> make_device_meter(const std::string& backend) {
#ifdef LOOM_HAVE_CUDA
  if (backend == "cuda") return cuda::make_cuda_meter();
#endif
  return make_rapl_meter();
}

}  // namespace loom::backend
