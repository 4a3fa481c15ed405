// Prometheus metrics: counters, gauges and histograms, each a member of a family (one name,
// HELP and TYPE) with its own label values, rendered in the text exposition format 0.0.4.
// Updates are lock-free; registering a metric and rendering take the registry's lock.
//
//   MetricsRegistry registry;
//   Counter* tokens = registry.AddCounter("pagoda_generation_tokens_total", "Tokens generated.");
//   tokens->Add(3);
//   registry.Render();   // "# HELP pagoda_generation_tokens_total ...\n...  3\n"
#ifndef PAGODA_COMMON_PROCESS_METRICS_H_
#define PAGODA_COMMON_PROCESS_METRICS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace pagoda {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending (+Inf is implied).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Observations <= bounds()[i] (cumulative), then the total count last.
  std::vector<uint64_t> CumulativeCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, the last one is +Inf
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies: 1 ms to ~100 s.
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  // `constant_labels` are rendered first on every series (e.g. vLLM's model_name).
  explicit MetricsRegistry(MetricLabels constant_labels = {});
  ~MetricsRegistry();

  // The returned metrics live as long as the registry. A name is one family: later calls with
  // the same name add members (they must differ in labels and agree on the type).
  Counter* AddCounter(const std::string& name, const std::string& help, MetricLabels labels = {});
  Gauge* AddGauge(const std::string& name, const std::string& help, MetricLabels labels = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> bounds, MetricLabels labels = {});
  // A gauge family whose members are read at scrape time (e.g. one per connected worker),
  // outside the registry's lock.
  using GaugeReader = std::function<std::vector<std::pair<MetricLabels, double>>()>;
  void AddGaugeFamily(const std::string& name, const std::string& help, GaugeReader read);
  // Drops a histogram's series (e.g. a worker that left); `histogram` is deleted. No-op for an
  // unknown pointer.
  void Remove(const Histogram* histogram);

  std::string Render() const;
  // Several registries as one exposition (e.g. one per served model, each with its model_name
  // constant label): a family several of them hold is written once, HELP and TYPE from the
  // first, with every registry's series.
  static std::string RenderAll(const std::vector<const MetricsRegistry*>& registries);

 private:
  struct Family;
  struct RenderedFamily {
    std::string name, help, type;
    std::string samples;  // its series' lines
  };
  std::vector<RenderedFamily> RenderFamilies() const;
  Family* FamilyLocked(const std::string& name, const std::string& help, const char* type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MetricLabels constant_labels_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);  // in registration order
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_METRICS_H_
