// The latency statistics of a serving benchmark, in the project's definitions
// (docs/architecture.md, "Measurement definitions"):
//   TTFT  request sent → first streamed content
//   TPOT  (E2E − TTFT) / (output tokens − 1), per request
//   ITL   the gaps between streamed content chunks
//   E2E   request sent → last byte
//   goodput  completed requests per second that met every declared SLO
// Rates are over the measured span: the first measured request sent → the last one's last byte.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/stats.h"
#include "bench/stream_client.h"

namespace bench {

// Service-level objectives; a bound ≤ 0 is not declared.
struct Slo {
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;
  bool any() const { return ttft_s > 0 || tpot_s > 0 || e2e_s > 0; }
  std::string str() const;  // "TTFT ≤ 1000 ms, TPOT ≤ 50 ms" or "none declared"
};

// One completed request's figures.
struct RequestMetrics {
  double ttft = 0, e2e = 0;
  double tpot = -1;            // -1: one output token or none, no TPOT
  std::vector<double> itl;
  int64_t output_tokens = 0;
  bool tokens_from_usage = false;  // else the count of content chunks
  int64_t prompt_tokens = -1;      // -1: the server sent no usage
};

// The figures of a timeline that completed (t.ok). Output tokens are the server's usage,
// else the number of content chunks.
RequestMetrics request_metrics(const RequestTimeline& t);

// Every declared bound holds. A request without a TPOT (one token) meets any TPOT bound.
bool meets(const RequestMetrics& m, const Slo& slo);

struct LoadSummary {
  size_t sent = 0, completed = 0, failed = 0, not_sent = 0;
  std::vector<std::pair<std::string, size_t>> errors;  // each distinct failure and how often
  double duration_s = 0;
  int64_t output_tokens = 0, prompt_tokens = 0;
  size_t tokens_from_usage = 0, tokens_from_chunks = 0;  // completed requests counted each way
  double request_throughput = 0, output_token_throughput = 0, prompt_token_throughput = 0;
  Summary ttft, tpot, itl, e2e;  // seconds
  Slo slo;
  size_t met_slo = 0;
  double goodput = 0;            // requests per second meeting every declared SLO (0 when none declared)
};

// `timelines`: every measured request that was sent; `not_sent`: those the deadline kept back.
LoadSummary summarize_load(const std::vector<RequestTimeline>& timelines, size_t not_sent, const Slo& slo);

}  // namespace bench
