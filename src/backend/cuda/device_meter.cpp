// The CUDA backend's meter: board energy from NVML's total-energy counter (millijoules since
// the driver loaded; Volta and later), NVML loaded with dlopen so that the binary links and
// runs where no driver is installed (CI); peak memory from the backend's own allocations
// (device_buffer.h counts every DeviceBuffer: weights, KV pool, activations, workspaces).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "common/error.h"

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
    if (name && name(dev_, buf, sizeof buf) == 0) name_ = buf, device_ = name_ + " (NVML)";
    driver_ = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib_, "nvmlSystemGetDriverVersion"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    power_limit_ = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(lib_, "nvmlDeviceGetPowerManagementLimit"));
    power_ = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(lib_, "nvmlDeviceGetPowerUsage"));
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
  // 1 GiB copied into another GiB (20x the largest L2 of these cards), best of 5 after one
  // untimed copy. Plain cudaMalloc, not DeviceBuffers: the probe's memory is not the program's
  // and must not show in its peak. A probe that cannot run (no 2 GiB free) is an error naming
  // the call, never a host figure in the device's place.
  std::optional<double> copy_gbs() override {
    constexpr size_t kBytes = size_t(1) << 30;
    void *src = nullptr, *dst = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    const char* failed = nullptr;
    cudaError_t err = cudaSuccess;
    const auto ok = [&](cudaError_t e, const char* what) {
      if (e != cudaSuccess && !failed) failed = what, err = e;
      return !failed;
    };
    float best_ms = 0;
    if (ok(cudaMalloc(&src, kBytes), "cudaMalloc") && ok(cudaMalloc(&dst, kBytes), "cudaMalloc") &&
        ok(cudaEventCreate(&start), "cudaEventCreate") && ok(cudaEventCreate(&stop), "cudaEventCreate") &&
        ok(cudaMemset(src, 1, kBytes), "cudaMemset") &&
        ok(cudaMemcpy(dst, src, kBytes, cudaMemcpyDeviceToDevice), "cudaMemcpy"))
      for (int r = 0; r < 5; ++r) {
        float ms = 0;
        if (!ok(cudaEventRecord(start), "cudaEventRecord") ||
            !ok(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync") ||
            !ok(cudaEventRecord(stop), "cudaEventRecord") || !ok(cudaEventSynchronize(stop), "cudaEventSynchronize") ||
            !ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime"))
          break;
        if (ms > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
      }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (src) cudaFree(src);
    if (dst) cudaFree(dst);
    cudaGetLastError();  // a failed probe leaves no sticky error for the next caller
    if (failed) loom::fail("the device copy probe (2 x 1 GiB): {} failed: {}", failed, cudaGetErrorString(err));
    if (best_ms <= 0) loom::fail("the device copy probe (2 x 1 GiB): no timing was read");
    return 2.0 * double(kBytes) / (double(best_ms) * 1e-3) / 1e9;
  }
  std::string why_no_energy() const override { return why_; }
  std::map<std::string, std::string> facts() const override {
    std::map<std::string, std::string> f;
    if (!dev_) return f;
    if (!name_.empty()) f["name"] = name_;
    char buf[96] = {};
    if (driver_ && driver_(buf, sizeof buf) == 0) f["driver"] = buf;
    unsigned v = 0;
    constexpr int kClockSm = 1, kClockMem = 2;  // nvmlClockType_t
    if (clock_ && clock_(dev_, kClockSm, &v) == 0) f["sm_clock_mhz"] = std::to_string(v);
    if (clock_ && clock_(dev_, kClockMem, &v) == 0) f["mem_clock_mhz"] = std::to_string(v);
    if (power_limit_ && power_limit_(dev_, &v) == 0) f["power_limit_w"] = std::to_string(v / 1000);  // milliwatts
    if (power_ && power_(dev_, &v) == 0) f["power_w"] = std::to_string(v / 1000);
    return f;
  }

 private:
  void* lib_ = nullptr;
  void* dev_ = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
  int (*driver_)(char*, unsigned) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*power_limit_)(void*, unsigned*) = nullptr;
  int (*power_)(void*, unsigned*) = nullptr;
  std::string device_ = "CUDA device 0", name_, why_;
};

}  // namespace

std::unique_ptr<DeviceMeter> make_cuda_meter() { return std::make_unique<NvmlMeter>(); }

}  // namespace loom::backend::cuda
