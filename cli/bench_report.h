// The figures of a `pagoda bench` run, as vLLM's serving benchmark prints them: a text table,
// or (--json) one object with vLLM's field names (output_throughput, median_ttft_ms, ...).
#ifndef PAGODA_CLI_BENCH_REPORT_H_
#define PAGODA_CLI_BENCH_REPORT_H_

#include <ostream>
#include <vector>

#include "cli/bench_backend.h"
#include "cli/bench_command.h"
#include "cli/bench_metrics_sampler.h"

namespace pagoda {

// Prints the report of `records` (one per request sent) over `duration` seconds; `sampler`
// (stopped; null when --metrics was not given) adds the router's figures. The first failure,
// if any, goes to `err`. Returns the number of requests that did not complete.
int PrintBenchReport(const BenchOptions& options, const std::vector<BenchRecord>& records,
                     double duration, const MetricsSampler* sampler, std::ostream& out,
                     std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_BENCH_REPORT_H_
