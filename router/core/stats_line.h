// The router's periodic one-line summary while it is busy (as vLLM's periodic stats): prompt and
// generation throughput, running and waiting sequences, KV use, prefix hit rate and step time
// over the interval since the last line, plus drafts and KV transfers when there were some.
#ifndef PAGODA_ROUTER_CORE_STATS_LINE_H_
#define PAGODA_ROUTER_CORE_STATS_LINE_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "router/core/cluster_reports.h"
#include "router/core/router_metrics.h"

namespace pagoda {

class StatsLine {
 public:
  // Reads `metrics`' counters (not owned; must outlive this). The first interval starts at
  // `start`.
  StatsLine(const RouterMetrics* metrics, absl::Time start,
            absl::Duration every = absl::Seconds(5));

  // The line for the interval ending at `now`, when more than `every` has passed since the last
  // one and steps ran in it; nullopt otherwise (the interval then goes on).
  std::optional<std::string> Next(const ClusterStats& stats, absl::Time now);

 private:
  // The counters at the end of an interval.
  struct Mark {
    ClusterStats stats;
    absl::Time time;
    double prompt = 0, generated = 0, queries = 0, hits = 0;
    double drafts = 0, draft_tokens = 0, accepted = 0;                   // speculative decoding
    double pulled_blocks = 0, pulled_bytes = 0, spared = 0, failed = 0;  // KV transfers
  };
  Mark Take(const ClusterStats& stats, absl::Time now) const;

  const RouterMetrics* const metrics_;
  const absl::Duration every_;
  Mark last_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STATS_LINE_H_
