#include "router/transfer/transfer_cost.h"

#include <algorithm>

namespace pagoda {
namespace {

// Pulls smaller than this measure the latency, larger ones the rate.
constexpr int64_t kRateBytes = 1 << 20;
constexpr double kDecay = 0.25;  // weight of the newest observation

}  // namespace

void TransferCost::ObservePull(int64_t bytes, double seconds) {
  if (bytes <= 0 || !(seconds > 0)) return;
  if (bytes < kRateBytes) {
    latency_seconds_ += kDecay * (seconds - latency_seconds_);
  } else {
    const double rate = bytes / std::max(seconds - latency_seconds_, seconds / 2);
    bytes_per_second_ += kDecay * (rate - bytes_per_second_);
  }
}

double TransferCost::PullSeconds(int64_t bytes) const {
  return latency_seconds_ + static_cast<double>(bytes) / bytes_per_second_;
}

bool TransferCost::Pays(int64_t bytes, int num_tokens, double seconds_per_token) const {
  if (num_tokens <= 0) return false;
  if (seconds_per_token <= 0) return true;
  return PullSeconds(bytes) < num_tokens * seconds_per_token;
}

}  // namespace pagoda
