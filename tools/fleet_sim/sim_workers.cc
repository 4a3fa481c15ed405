#include "tools/fleet_sim/sim_workers.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "tools/fleet_sim/sim_worker.h"

namespace pagoda::fleet {

SimWorkers::SimWorkers(SimWorkersOptions options) : options_(std::move(options)) {}

SimWorkers::~SimWorkers() { Stop(); }

void SimWorkers::Stop() {
  for (auto& w : workers_) w->Cancel();
  for (auto& w : workers_) w->WaitDone();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (timer_.joinable()) timer_.join();
  workers_.clear();
}

void SimWorkers::Start() {
  timer_ = std::thread([this] { TimerLoop(); });
  for (int i = 0; i < options_.num_workers; ++i) {
    workers_.push_back(std::make_unique<SimWorker>(this, i));
  }
  const absl::Time now = absl::Now();
  for (auto& w : workers_) {
    w->Start();
    absl::MutexLock lock(&mu_);
    due_.push_back({now + absl::Seconds(1), w.get(), true});
    std::push_heap(due_.begin(), due_.end(), std::greater<>());
  }
}

void SimWorkers::OnConnected(bool accepted) { (accepted ? connected_ : refused_).fetch_add(1); }

bool SimWorkers::WaitConnected(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (refused_.load() > 0) return false;
    if (connected_.load() == options_.num_workers) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

void SimWorkers::Schedule(absl::Time when, SimWorker* worker) {
  absl::MutexLock lock(&mu_);
  due_.push_back({when, worker, false});
  std::push_heap(due_.begin(), due_.end(), std::greater<>());
}

void SimWorkers::TimerLoop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (stop_) return;
    const absl::Time now = absl::Now();
    if (due_.empty() || due_.front().when > now) {
      wake_ = due_.empty() ? now + absl::Milliseconds(100) : due_.front().when;
      mu_.AwaitWithDeadline(absl::Condition(this, &SimWorkers::WakeEarlier), wake_);
      continue;
    }
    std::pop_heap(due_.begin(), due_.end(), std::greater<>());
    const Due due = due_.back();
    due_.pop_back();
    mu_.Unlock();
    const absl::Time next = due.worker->Fire(now);
    mu_.Lock();
    if (due.chain && next != absl::InfiniteFuture()) {
      due_.push_back({std::min(next, now + absl::Seconds(1)), due.worker, true});
      std::push_heap(due_.begin(), due_.end(), std::greater<>());
    }
  }
}

}  // namespace pagoda::fleet
