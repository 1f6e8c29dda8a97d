// Backends by name, for --backend flags: "cpu" is the fast CPU backend, "cpu-ref" the
// reference interpreter (the yardstick), "cuda" the GPU backend where nvcc built it. An
// unknown name is an error listing the known ones.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_meter.h"

namespace loom::backend {

std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> backend_names();
// For --backend help texts: every backend of this build with what it is, e.g.
// "cpu (fast), cpu-ref (the reference interpreter), cuda (NVIDIA GPU)".
std::string backend_choices();
// The meter of the device a backend runs on: NVML for cuda, RAPL for the CPU backends.
std::unique_ptr<DeviceMeter> make_device_meter(const std::string& backend);

}  // namespace loom::backend
