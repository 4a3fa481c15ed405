#include "worker/stage_mailbox.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda {

void StageMailbox::Put(int64_t step_id, std::vector<float> hidden) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  pending_[step_id] = std::move(hidden);
  while (static_cast<int>(pending_.size()) > max_pending_) pending_.erase(pending_.begin());
}

absl::Status StageMailbox::Take(int64_t step_id, std::span<float> out, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const int64_t interrupts = interrupts_;
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || interrupts_ != interrupts || pending_.contains(step_id);
  };
  mu_.AwaitWithTimeout(absl::Condition(&arrived), timeout);
  if (closed_) return absl::CancelledError("the stage link is closed");
  if (interrupts_ != interrupts) {
    return absl::CancelledError(
        absl::StrCat("step ", step_id, ": abandoned while waiting for the previous stage"));
  }
  auto it = pending_.find(step_id);
  if (it == pending_.end()) {
    return absl::DeadlineExceededError(
        absl::StrCat("step ", step_id, ": the previous stage's activations did not arrive within ",
                     absl::FormatDuration(timeout)));
  }
  std::vector<float> hidden = std::move(it->second);
  pending_.erase(it);
  if (hidden.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("step ", step_id, ": the previous stage sent ",
                                                   hidden.size(), " activations, not ",
                                                   out.size()));
  }
  std::copy(hidden.begin(), hidden.end(), out.begin());
  return absl::OkStatus();
}

void StageMailbox::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  pending_.clear();
}

void StageMailbox::Interrupt() {
  absl::MutexLock lock(&mu_);
  ++interrupts_;
}

void StageMailbox::Clear() {
  absl::MutexLock lock(&mu_);
  pending_.clear();
}

int StageMailbox::num_pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size());
}

}  // namespace pagoda
