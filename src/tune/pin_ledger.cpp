#include "tune/pin_ledger.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "backend/registry.h"
#include "bench/machine.h"
#include "quant/simd/kernels.h"
#include "tune/digest.h"

namespace loom::tune {

using nlohmann::json;

namespace {

json read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return nullptr;  // not readable here: null, never a guess
  return line;
}

}  // namespace

json pin_ledger(const Contract& c, const BuildIdentity& build, const std::string& program_path,
                const std::string& workload_commit, int arm_threads) {
  utsname u{};
  uname(&u);
  json env = json::object();
  // Variables that can change how a run behaves or is scheduled; others are not recorded.
  for (const char* k : {"OMP_NUM_THREADS", "LOOM_CACHE", "LD_PRELOAD", "MALLOC_ARENA_MAX", "GOMP_CPU_AFFINITY"}) {
    const char* v = std::getenv(k);
    env[k] = v ? json(v) : json(nullptr);
  }
  // The device the backend runs on (a GPU's name, driver, clocks and power as NVML reads them
  // now); a CPU backend has none, and an unreadable fact stays null.
  const auto facts = backend::make_device_meter(c.backend)->facts();
  auto fact = [&](const char* k) -> json {
    const auto it = facts.find(k);
    return it == facts.end() ? json(nullptr) : json(it->second);
  };
  json power = nullptr;
  if (facts.count("power_limit_w") || facts.count("power_w"))
    power = {{"limit_w", fact("power_limit_w")}, {"draw_w", fact("power_w")}};
  json gpu = nullptr;
  if (facts.count("name"))
    gpu = {{"name", fact("name")}, {"sm_clock_mhz", fact("sm_clock_mhz")}, {"mem_clock_mhz", fact("mem_clock_mhz")}};
  return {
      {"schema_version", "loom.pin_ledger.v1"},
      {"loom", {{"version", build.version}, {"git_revision", build.commit}, {"compiler", build.compiler},
                {"flags", build.flags}}},
      {"model", {{"gguf", c.path_of(c.gguf)}, {"sha256", c.gguf_sha256}}},
      {"program", {{"path", c.program}, {"sha256", sha256_file(program_path)}}},
      {"workload", {{"dir", c.dir}, {"git_commit", workload_commit},
                    {"contract_sha256", sha256_file(c.path_of(kContractFile))}}},
      {"backend", c.backend},
      {"threads", {{"contract", c.threads}, {"arm", arm_threads}}},
      {"machine", {{"cpu", bench::cpu_model()}, {"cpu_features", bench::cpu_features()},
                   {"isa", loom::quant::simd::isa_name()}, {"hardware_threads", std::thread::hardware_concurrency()},
                   {"kernel", std::string(u.sysname) + " " + u.release}, {"hostname", u.nodename},
                   {"cpu0_governor", read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")},
                   {"cpu0_max_khz", read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq")},
                   {"gpu", gpu}, {"driver", fact("driver")}, {"power", power}}},
      {"environment", env},
  };
}

}  // namespace loom::tune
