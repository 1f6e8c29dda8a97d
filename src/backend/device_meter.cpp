#include "backend/device_meter.h"

#include <fstream>

namespace loom::backend {

namespace {

// intel-rapl:0 is package 0 (the kernel names AMD's RAPL the same). energy_uj wraps at
// max_energy_range_uj; a reading that went backwards is corrected by one wrap.
class RaplMeter final : public DeviceMeter {
 public:
  RaplMeter() {
    std::ifstream range(kDir + std::string("max_energy_range_uj"));
    range >> wrap_uj_;
    if (!read_uj(last_uj_)) why_ = "RAPL is not readable here (" + std::string(kDir) + "energy_uj)";
  }
  std::string device() const override { return "CPU package 0 (RAPL)"; }
  std::optional<double> energy_joules() override {
    if (!why_.empty()) return std::nullopt;
    double uj = 0;
    if (!read_uj(uj)) return std::nullopt;
    if (uj < last_uj_) offset_uj_ += wrap_uj_;
    last_uj_ = uj;
    return (uj + offset_uj_) * 1e-6;
  }
  std::optional<double> peak_bytes() const override { return std::nullopt; }
  std::string why_no_energy() const override { return why_; }

 private:
  static constexpr const char* kDir = "/sys/class/powercap/intel-rapl:0/";
  static bool read_uj(double& uj) {
    std::ifstream f(kDir + std::string("energy_uj"));
    return bool(f >> uj);
  }
  double wrap_uj_ = 0, last_uj_ = 0, offset_uj_ = 0;
  std::string why_;
};

}  // namespace

std::unique_ptr<DeviceMeter> make_rapl_meter() { return std::make_unique<RaplMeter>(); }

}  // namespace loom::backend
