// The report of a serving benchmark, as text and as JSON: what was run (server, model,
// requests, arrivals, warm-up, prefix-cache state, SLOs) beside what was measured.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "bench/load_run.h"
#include "bench/load_stats.h"

namespace bench {

struct LoadSetup {
  std::string url, model, endpoint;
  std::string requests;      // how the request set was made ("synthetic: seed 1, …" / "file: x.jsonl")
  std::string prefix_cache;  // the prefix-cache state the requests imply
  Arrivals arrivals;
  size_t warmup = 0;
  double deadline_s = 0;
};

nlohmann::json report_json(const LoadSetup& setup, const LoadResult& run, const LoadSummary& s);
std::string report_text(const LoadSetup& setup, const LoadResult& run, const LoadSummary& s);

}  // namespace bench
