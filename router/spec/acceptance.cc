#include "router/spec/acceptance.h"

#include <algorithm>

#include "glog/logging.h"

namespace pagoda {
namespace {

// Where the count of steps without a draft stops (no probe interval is longer).
constexpr int kMaxStepsWithoutDraft = 1 << 20;

}  // namespace

AcceptanceStats::AcceptanceStats(const AcceptanceOptions& options) : options_(options) {
  CHECK(options.alpha > 0 && options.alpha <= 1) << "AcceptanceOptions alpha=" << options.alpha;
  CHECK(options.initial_rate >= 0 && options.initial_rate <= 1)
      << "AcceptanceOptions initial_rate=" << options.initial_rate;
  rates_.fill(options.initial_rate);
}

void AcceptanceStats::Record(int proposed, int accepted) {
  proposed = std::max(proposed, 0);
  accepted = std::clamp(accepted, 0, proposed);
  if (proposed == 0) {
    if (steps_without_draft_ < kMaxStepsWithoutDraft) ++steps_without_draft_;
    return;
  }
  steps_without_draft_ = 0;
  ++num_drafts_;
  num_draft_tokens_ += proposed;
  num_accepted_tokens_ += accepted;
  const int reached = std::min(accepted + 1, proposed);  // positions that saw a verdict
  for (int i = 0; i < reached; ++i) {
    float& rate = rates_[std::min(i, kNumPositions - 1)];
    rate += options_.alpha * ((i < accepted ? 1.0f : 0.0f) - rate);
  }
}

float AcceptanceStats::rate(int position) const {
  return rates_[std::clamp(position, 0, kNumPositions - 1)];
}

float AcceptanceStats::expected(int k) const {
  float product = 1;
  for (int i = 0; i < k; ++i) product *= rate(i);
  return product;
}

int AcceptanceStats::ChooseK(int k_max) const {
  int k = 0;
  float product = 1;
  while (k < k_max) {
    product *= rate(k);
    if (product < options_.min_expected) break;
    ++k;
  }
  if (k == 0 && k_max >= 1 && options_.probe_every > 0 &&
      steps_without_draft_ >= options_.probe_every) {
    return 1;
  }
  return k;
}

bool AcceptanceStats::ProbeDue(int min_steps) const {
  return options_.probe_every > 0 &&
         steps_without_draft_ >=
             std::min(std::max(min_steps, options_.probe_every), kMaxStepsWithoutDraft);
}

}  // namespace pagoda
