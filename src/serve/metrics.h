// The server's Prometheus metrics: counters, gauges and latency histograms, written in the
// text exposition format at /metrics. Updated from HTTP and engine threads (one mutex; the
// updates are a few per request and per step).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace loom::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t n_ = 0;
};

struct EngineGauges {
  int64_t waiting = 0, running = 0, blocks_in_use = 0, blocks_cached = 0, blocks_total = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& endpoint, int status);
  void tokens(int64_t prompt, int64_t generated, int64_t reused);
  void latency(double ttft, double tpot, double e2e);  // tpot < 0: fewer than two tokens
  void engine(const EngineGauges& g);
  void cancelled();
  // Speculative decoding of a finished request: draft tokens verified, accepted, verifying steps.
  void speculation(int64_t drafted, int64_t accepted, int64_t steps);
  std::string text() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_ = 0, generated_ = 0, reused_ = 0, cancelled_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0, verify_steps_ = 0;
  EngineGauges gauges_;
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace loom::serve
