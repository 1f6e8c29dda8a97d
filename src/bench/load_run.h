// A serving benchmark's run: warm-up requests first (closed-loop, not measured), then the
// measured requests under the arrival process, every one bounded by the run's deadline.
#pragma once
#include <functional>
#include <vector>

#include "bench/arrivals.h"
#include "bench/request_set.h"
#include "bench/stream_client.h"

namespace bench {

struct LoadPlan {
  ServerTarget target;
  std::vector<RequestSpec> warmup;    // sent first at warmup_concurrency; their timings are dropped
  int warmup_concurrency = 1;
  std::vector<RequestSpec> requests;  // measured
  Arrivals arrivals;
  double deadline_s = 600;            // the whole run, warm-up included: nothing is sent after it, and
                                      // a reply still streaming then is cut off (a failure)
  std::function<void(const char* phase, size_t finished, size_t total)> progress;  // may be empty
};

struct LoadResult {
  std::vector<RequestTimeline> timelines;  // the measured requests that were sent, in request order
  size_t not_sent = 0;                     // measured requests the deadline kept back
  size_t warmup_sent = 0, warmup_failed = 0;
  std::string warmup_error;                // the first warm-up failure, if any
};

LoadResult run_load(const LoadPlan& plan);

}  // namespace bench
