#include "cli/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"

namespace pagoda {
namespace {

// numpy.percentile's default (linear interpolation between closest ranks).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

struct Stat {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};

Stat Summarize(std::vector<double> v) {  // seconds in, milliseconds out
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size() * 1e3;
  s.median = Percentile(v, 50) * 1e3;
  s.p90 = Percentile(v, 90) * 1e3;
  s.p99 = Percentile(v, 99) * 1e3;
  return s;
}

// `v` with `digits` decimals, as JSON prints it (no trailing digits of binary noise).
double Round(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

}  // namespace

int PrintBenchReport(const BenchOptions& o, const std::vector<BenchRecord>& records,
                     double duration, const MetricsSampler* sampler, std::ostream& out,
                     std::ostream& err) {
  int completed = 0;
  int64_t input = 0, output = 0, cached = 0;
  std::vector<double> ttft, tpot, itl, e2el;
  std::string first_error;
  for (const BenchRecord& r : records) {
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++completed;
    input += r.prompt_tokens;
    output += r.output_tokens;
    cached += r.cached_tokens;
    ttft.push_back(r.ttft);
    e2el.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  const int failed = o.num_prompts - completed;
  const Stat s_ttft = Summarize(ttft), s_tpot = Summarize(tpot), s_itl = Summarize(itl),
             s_e2el = Summarize(e2el);
  const double hit_rate = input ? static_cast<double>(cached) / input : 0;
  const bool sampled = sampler != nullptr && sampler->num_samples > 0;
  auto busy_mean = [&](double sum) { return sampler->num_busy ? sum / sampler->num_busy : 0.0; };

  if (o.json) {
    OrderedJson j = {{"backend", o.backend},
                     {"dataset", o.dataset},
                     {"num_prompts", o.num_prompts},
                     {"request_rate", std::isfinite(o.request_rate) ? OrderedJson(o.request_rate)
                                                                    : OrderedJson("inf")},
                     {"max_concurrency", o.max_concurrency},
                     {"completed", completed},
                     {"failed", failed},
                     {"duration", Round(duration, 3)},
                     {"total_input_tokens", input},
                     {"total_output_tokens", output},
                     {"request_throughput", Round(completed / duration, 3)},
                     {"input_throughput", Round(input / duration, 2)},
                     {"output_throughput", Round(output / duration, 2)},
                     {"total_token_throughput", Round((input + output) / duration, 2)},
                     {"prefix_cache_hit_rate", Round(hit_rate, 4)}};
    for (const auto& [name, s] : {std::pair<const char*, Stat>{"ttft", s_ttft},
                                  {"tpot", s_tpot},
                                  {"itl", s_itl},
                                  {"e2el", s_e2el}}) {
      j[absl::StrCat("mean_", name, "_ms")] = Round(s.mean, 3);
      j[absl::StrCat("median_", name, "_ms")] = Round(s.median, 3);
      j[absl::StrCat("p90_", name, "_ms")] = Round(s.p90, 3);
      j[absl::StrCat("p99_", name, "_ms")] = Round(s.p99, 3);
    }
    if (sampler != nullptr) {  // /metrics never answered: unknown (null), not zero
      auto figure = [&](double v, int digits) {
        return sampled ? OrderedJson(Round(v, digits)) : OrderedJson(nullptr);
      };
      j["peak_running"] = figure(sampler->peak_running, 0);
      j["mean_kv_cache_usage"] = figure(busy_mean(sampler->usage_sum), 4);
      j["peak_kv_cache_usage"] = figure(sampler->peak_usage, 4);
      j["mean_kv_cache_utilization"] = figure(busy_mean(sampler->utilization_sum), 4);
    }
    if (!first_error.empty()) j["first_error"] = first_error;
    out << JsonDump(j) << "\n";
  } else {
    auto line = [&](const std::string& k, const std::string& v) {
      out << absl::StrFormat("%-40s%s\n", k, v);
    };
    out << "============ Serving Benchmark Result ============\n";
    line("Successful requests:", absl::StrCat(completed));
    line("Failed requests:", absl::StrCat(failed));
    line("Benchmark duration (s):", absl::StrFormat("%.2f", duration));
    line("Total input tokens:", absl::StrCat(input));
    line("Total generated tokens:", absl::StrCat(output));
    line("Request throughput (req/s):", absl::StrFormat("%.2f", completed / duration));
    line("Input token throughput (tok/s):", absl::StrFormat("%.2f", input / duration));
    line("Output token throughput (tok/s):", absl::StrFormat("%.2f", output / duration));
    line("Total token throughput (tok/s):", absl::StrFormat("%.2f", (input + output) / duration));
    line("Prefix cache hit rate:", absl::StrFormat("%.2f%%", 100 * hit_rate));
    for (const auto& [title, name, s] :
         {std::tuple<const char*, const char*, Stat>{"Time to First Token", "TTFT", s_ttft},
          {"Time per Output Token", "TPOT", s_tpot},
          {"Inter-token Latency", "ITL", s_itl},
          {"End-to-end Latency", "E2EL", s_e2el}}) {
      out << absl::StrFormat("%s\n", std::string(16, '-') + std::string(title) +
                                         std::string(std::max<int>(2, 34 - strlen(title)), '-'));
      line(absl::StrFormat("Mean %s (ms):", name), absl::StrFormat("%.2f", s.mean));
      line(absl::StrFormat("Median %s (ms):", name), absl::StrFormat("%.2f", s.median));
      line(absl::StrFormat("P90 %s (ms):", name), absl::StrFormat("%.2f", s.p90));
      line(absl::StrFormat("P99 %s (ms):", name), absl::StrFormat("%.2f", s.p99));
    }
    if (sampler != nullptr) {
      out << "-------------Router (sampled /metrics)------------\n";
      auto percent = [&](double sum) {
        return sampled ? absl::StrFormat("%.1f%%", 100 * busy_mean(sum)) : std::string("n/a");
      };
      line("Peak running sequences:",
           sampled ? absl::StrFormat("%.0f", sampler->peak_running) : std::string("n/a"));
      line("Mean KV cache usage (busy):", percent(sampler->usage_sum));
      line("Mean KV utilization (busy):", percent(sampler->utilization_sum));
    }
    out << "==================================================\n";
  }
  if (!first_error.empty()) err << "first failure: " << first_error << "\n";
  return failed;
}

}  // namespace pagoda
