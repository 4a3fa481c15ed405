#include "common/process/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {

struct MetricsRegistry::Family {
  std::string name, help, type;
  struct Member {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  std::vector<Member> members;
  GaugeReader read;
};

namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;  // shortest exact form
  return std::string(buf, end);
}

// `{a="x",b="y"}` with the text format's escapes; empty for no labels.
std::string FormatLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, labels[i].first, "=\"");
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out + "}";
}

MetricLabels With(MetricLabels labels, const std::string& key, const std::string& value) {
  labels.emplace_back(key, value);
  return labels;
}

MetricLabels Join(const MetricLabels& first, const MetricLabels& then) {
  MetricLabels labels = first;
  labels.insert(labels.end(), then.begin(), then.end());
  return labels;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i] = 0;
}

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,   10,   20,    40,  80,   100};
}

MetricsRegistry::MetricsRegistry(MetricLabels constant_labels)
    : constant_labels_(std::move(constant_labels)) {}
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Family* MetricsRegistry::FamilyLocked(const std::string& name,
                                                       const std::string& help, const char* type) {
  for (auto& f : families_) {
    if (f->name == name) {
      CHECK_EQ(f->type, type) << name;
      return f.get();
    }
  }
  families_.push_back(std::make_unique<Family>());
  Family* f = families_.back().get();
  f->name = name;
  f->help = help;
  f->type = type;
  return f;
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  auto& m = FamilyLocked(name, help, "counter")->members.emplace_back();
  m.labels = std::move(labels);
  m.counter = std::make_unique<Counter>();
  return m.counter.get();
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  auto& m = FamilyLocked(name, help, "gauge")->members.emplace_back();
  m.labels = std::move(labels);
  m.gauge = std::make_unique<Gauge>();
  return m.gauge.get();
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> bounds, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  auto& m = FamilyLocked(name, help, "histogram")->members.emplace_back();
  m.labels = std::move(labels);
  m.histogram = std::make_unique<Histogram>(std::move(bounds));
  return m.histogram.get();
}

void MetricsRegistry::Remove(const Histogram* histogram) {
  absl::MutexLock lock(&mu_);
  for (auto& f : families_) {
    std::erase_if(f->members,
                  [&](const Family::Member& m) { return m.histogram.get() == histogram; });
  }
}

void MetricsRegistry::AddGaugeFamily(const std::string& name, const std::string& help,
                                     GaugeReader read) {
  absl::MutexLock lock(&mu_);
  FamilyLocked(name, help, "gauge")->read = std::move(read);
}

std::string MetricsRegistry::Render() const { return RenderAll({this}); }

std::string MetricsRegistry::RenderAll(const std::vector<const MetricsRegistry*>& registries) {
  std::vector<RenderedFamily> merged;  // by name, in the order names first appear
  for (const MetricsRegistry* registry : registries) {
    for (RenderedFamily& f : registry->RenderFamilies()) {
      auto same = std::find_if(merged.begin(), merged.end(),
                               [&](const RenderedFamily& m) { return m.name == f.name; });
      if (same == merged.end()) {
        merged.push_back(std::move(f));
      } else {
        same->samples += f.samples;
      }
    }
  }
  std::string out;
  for (const RenderedFamily& f : merged) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name, " ", f.type, "\n",
                    f.samples);
  }
  return out;
}

std::vector<MetricsRegistry::RenderedFamily> MetricsRegistry::RenderFamilies() const {
  // Readers run without the registry's lock: they take their sources' locks, and those
  // sources may register metrics while holding them.
  std::vector<std::pair<const Family*, GaugeReader>> readers;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& f : families_) {
      if (f->read) readers.emplace_back(f.get(), f->read);
    }
  }
  std::vector<std::pair<const Family*, std::vector<std::pair<MetricLabels, double>>>> read;
  for (const auto& [family, reader] : readers) read.emplace_back(family, reader());

  absl::MutexLock lock(&mu_);
  std::vector<RenderedFamily> rendered;
  for (const auto& f : families_) {
    RenderedFamily& r = rendered.emplace_back();
    r.name = f->name;
    r.help = f->help;
    r.type = f->type;
    std::string& out = r.samples;
    for (const auto& [family, values] : read) {
      if (family != f.get()) continue;
      for (const auto& [labels, value] : values) {
        absl::StrAppend(&out, f->name, FormatLabels(Join(constant_labels_, labels)), " ",
                        FormatValue(value), "\n");
      }
    }
    for (const auto& m : f->members) {
      const MetricLabels labels = Join(constant_labels_, m.labels);
      if (m.counter || m.gauge) {
        const double v = m.counter ? m.counter->value() : m.gauge->value();
        absl::StrAppend(&out, f->name, FormatLabels(labels), " ", FormatValue(v), "\n");
        continue;
      }
      const Histogram& h = *m.histogram;
      const std::vector<uint64_t> counts = h.CumulativeCounts();
      for (size_t i = 0; i < counts.size(); ++i) {
        const std::string le = i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf";
        absl::StrAppend(&out, f->name, "_bucket", FormatLabels(With(labels, "le", le)), " ",
                        counts[i], "\n");
      }
      absl::StrAppend(&out, f->name, "_sum", FormatLabels(labels), " ", FormatValue(h.sum()), "\n",
                      f->name, "_count", FormatLabels(labels), " ", counts.back(), "\n");
    }
  }
  return rendered;
}

}  // namespace pagoda
