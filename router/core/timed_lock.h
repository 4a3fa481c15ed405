// A scoped lock that counts how long its takers waited: the cost of a contended absl::Mutex,
// measured without slowing the uncontended path (one TryLock). Thread-safe.
#ifndef PAGODA_ROUTER_CORE_TIMED_LOCK_H_
#define PAGODA_ROUTER_CORE_TIMED_LOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pagoda {

// Counts of a TimedMutexLock's takers (never decrease).
struct LockWaits {
  std::atomic<int64_t> num_locks{0};
  std::atomic<int64_t> num_waits{0};  // of those, the ones that found the mutex taken
  std::atomic<int64_t> wait_ns{0};    // their time until they had it
};

class ABSL_SCOPED_LOCKABLE TimedMutexLock {
 public:
  TimedMutexLock(absl::Mutex* mu, LockWaits* waits) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    waits->num_locks.fetch_add(1, std::memory_order_relaxed);
    if (mu->TryLock()) return;
    const auto start = std::chrono::steady_clock::now();
    mu->Lock();
    const auto waited = std::chrono::steady_clock::now() - start;
    waits->num_waits.fetch_add(1, std::memory_order_relaxed);
    waits->wait_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count(),
                             std::memory_order_relaxed);
  }
  ~TimedMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  TimedMutexLock(const TimedMutexLock&) = delete;
  TimedMutexLock& operator=(const TimedMutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_TIMED_LOCK_H_
