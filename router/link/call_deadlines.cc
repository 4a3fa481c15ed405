#include "router/link/call_deadlines.h"

#include <utility>

#include "absl/time/clock.h"

namespace pagoda {

CallDeadlines::CallDeadlines(absl::Duration tick) : tick_(tick), thread_([this] { Run(); }) {}

CallDeadlines::~CallDeadlines() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  thread_.join();
}

std::shared_ptr<CallDeadlines::Deadline> CallDeadlines::Add(std::function<void()> cancel,
                                                            absl::Duration timeout) {
  auto deadline = std::make_shared<Deadline>();
  deadline->Beat(timeout);
  absl::MutexLock lock(&mu_);
  calls_[deadline.get()] = {.deadline = deadline, .cancel = std::move(cancel)};
  return deadline;
}

void CallDeadlines::Remove(const Deadline* deadline) {
  absl::MutexLock lock(&mu_);
  calls_.erase(deadline);
}

void CallDeadlines::Run() {
  absl::MutexLock lock(&mu_);
  while (!done_) {
    mu_.AwaitWithTimeout(absl::Condition(&done_), tick_);
    if (done_) break;
    const int64_t now = absl::ToUnixNanos(absl::Now());
    for (auto& [key, entry] : calls_) {
      if (entry.deadline->fired_.load() || now <= entry.deadline->at_ns_.load()) continue;
      entry.deadline->fired_.store(true);
      entry.cancel();
    }
  }
}

}  // namespace pagoda
