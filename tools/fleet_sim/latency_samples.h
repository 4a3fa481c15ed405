// Latency samples gathered from many threads: each producer keeps its own batch and hands it
// over at once (Merge), so recording costs no lock per sample.
#ifndef PAGODA_TOOLS_FLEET_SIM_LATENCY_SAMPLES_H_
#define PAGODA_TOOLS_FLEET_SIM_LATENCY_SAMPLES_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace pagoda::fleet {

class LatencySamples {
 public:
  void Merge(std::vector<float>& batch) {
    if (batch.empty()) return;
    absl::MutexLock lock(&mu_);
    samples_.insert(samples_.end(), batch.begin(), batch.end());
    batch.clear();
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    samples_.clear();
  }
  int64_t size() {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(samples_.size());
  }
  // The q-quantile (0..1) of what was merged; 0 when nothing was.
  double Quantile(double q) {
    absl::MutexLock lock(&mu_);
    if (samples_.empty()) return 0.0;
    const size_t k = std::min(samples_.size() - 1, static_cast<size_t>(q * samples_.size()));
    std::nth_element(samples_.begin(), samples_.begin() + k, samples_.end());
    return samples_[k];
  }

 private:
  absl::Mutex mu_;
  std::vector<float> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_LATENCY_SAMPLES_H_
