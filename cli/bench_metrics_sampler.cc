#include "cli/bench_metrics_sampler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/process/http_client.h"

namespace pagoda {

MetricsSampler::MetricsSampler(const std::string& address) {
  const size_t colon = address.rfind(':');
  host_ = address.substr(0, colon);
  port_ = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  thread_ = std::thread([this] {
    while (!stop_) {
      const HttpResult r = HttpGet(host_, port_, "/metrics", /*timeout_ms=*/2000);
      if (r.status == 200) Sample(r.body);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void MetricsSampler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void MetricsSampler::Sample(const std::string& text) {
  double running = 0, usage = 0, utilization = 0;
  int workers = 0, holding = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &v)) {
      continue;
    }
    const absl::string_view name = line.substr(0, line.find_first_of("{ "));
    if (name == "pagoda_num_requests_running") running = v;
    if (name == "pagoda_kv_cache_usage") {
      usage += v;
      ++workers;
    }
    if (name == "pagoda_kv_cache_utilization" && v > 0) {
      utilization += v;
      ++holding;
    }
  }
  ++num_samples;
  peak_running = std::max(peak_running, running);
  if (running > 0) {
    ++num_busy;
    const double mean_usage = workers ? usage / workers : 0;
    usage_sum += mean_usage;
    peak_usage = std::max(peak_usage, mean_usage);
    utilization_sum += holding ? utilization / holding : 0;
  }
}

}  // namespace pagoda
