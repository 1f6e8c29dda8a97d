#include "tune/pin_ledger.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

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
                   {"gpu", nullptr}, {"driver", nullptr}, {"power", nullptr}}},
      {"environment", env},
  };
}

}  // namespace loom::tune
