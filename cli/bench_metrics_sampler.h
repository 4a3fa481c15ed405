// Samples a router's Prometheus /metrics every 100 ms while a bench runs: peak running
// sequences, and KV usage and utilization while sequences run. A scrape that fails or does not
// parse is skipped; none at all leaves num_samples at 0 (reported as n/a, not as zeros).
#ifndef PAGODA_CLI_BENCH_METRICS_SAMPLER_H_
#define PAGODA_CLI_BENCH_METRICS_SAMPLER_H_

#include <atomic>
#include <string>
#include <thread>

namespace pagoda {

class MetricsSampler {
 public:
  explicit MetricsSampler(const std::string& address);  // HOST:PORT; starts sampling
  ~MetricsSampler() { Stop(); }
  void Stop();  // the figures below are read after Stop()

  int num_samples = 0, num_busy = 0;  // all, and those with sequences running
  double peak_running = 0, usage_sum = 0, peak_usage = 0, utilization_sum = 0;

 private:
  void Sample(const std::string& text);

  std::string host_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pagoda

#endif  // PAGODA_CLI_BENCH_METRICS_SAMPLER_H_
