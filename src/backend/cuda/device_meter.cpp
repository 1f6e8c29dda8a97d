// The CUDA backend's meter: board energy from NVML's total-energy counter (millijoules since
// the driver loaded; Volta and later), NVML loaded with dlopen so that the binary links and
// runs where no driver is installed (CI); peak memory from the backend's own allocations
// (device_buffer.h counts every DeviceBuffer: weights, KV pool, activations, workspaces).
#include <dlfcn.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"

namespace loom::backend::cuda {

namespace {

class NvmlMeter final : public DeviceMeter {
 public:
  NvmlMeter() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      why_ = "NVML (libnvidia-ml.so.1) is not on the library path";
      return;
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    auto handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    auto name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib_, "nvmlDeviceGetName"));
    energy_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption"));
    if (!init || !handle || !energy_ || init() != 0 || handle(0, &dev_) != 0) {
      why_ = "NVML did not open device 0";
      return;
    }
    char buf[96] = {};
    if (name && name(dev_, buf, sizeof buf) == 0) device_ = std::string(buf) + " (NVML)";
    unsigned long long mj = 0;
    if (energy_(dev_, &mj) != 0) why_ = "NVML has no energy counter for this device";
  }
  std::string device() const override { return device_; }
  std::optional<double> energy_joules() override {
    unsigned long long mj = 0;
    if (!why_.empty() || energy_(dev_, &mj) != 0) return std::nullopt;
    return double(mj) * 1e-3;
  }
  std::optional<double> peak_bytes() const override { return double(DeviceBuffer::peak_bytes()); }
  std::string why_no_energy() const override { return why_; }

 private:
  void* lib_ = nullptr;
  void* dev_ = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
  std::string device_ = "CUDA device 0", why_;
};

}  // namespace

std::unique_ptr<DeviceMeter> make_cuda_meter() { return std::make_unique<NvmlMeter>(); }

}  // namespace loom::backend::cuda
