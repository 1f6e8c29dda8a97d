// What a benchmark reads off the device a backend runs on, beside its speeds: the energy the
// device has used (a counter read before and after a measurement) and the peak memory the
// backend allocated on it. Each figure may be unreadable on a machine (no NVML, RAPL not
// exposed): then `why` says so and the report prints that instead of a number.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace loom::backend {

class DeviceMeter {
 public:
  virtual ~DeviceMeter() = default;
  virtual std::string device() const = 0;             // "NVIDIA H200 (NVML)", "CPU package (RAPL)"
  virtual std::optional<double> energy_joules() = 0;  // a monotonic counter; nullopt: unreadable
  virtual std::optional<double> peak_bytes() const = 0;  // this process's peak allocation there
  virtual std::string why_no_energy() const = 0;
  // What a pin ledger records of the device, read now: "name", "driver", "sm_clock_mhz",
  // "mem_clock_mhz", "power_limit_w", "power_w". A fact that is unreadable here is absent.
  virtual std::map<std::string, std::string> facts() const { return {}; }
  // The device memory's rate in GB/s as a device-to-device copy moves it (bytes read plus bytes
  // written a second, as ANCHORS.md measures a card), measured now: the decode ceiling of a
  // backend whose weights live there. nullopt for the host's memory (the CPU backends' ceiling
  // is bench's read probe on their threads); throws when the device's probe cannot run.
  virtual std::optional<double> copy_gbs() { return std::nullopt; }
};

// The CPU package's RAPL counter (/sys/class/powercap) where readable; peak memory is the
// process's RSS, which the benchmark reports already, so none here.
std::unique_ptr<DeviceMeter> make_rapl_meter();

}  // namespace loom::backend
