// Ends calls that go silent, for every call of a service with one thread: each call registers
// how to cancel itself and a deadline, which each message it receives moves on (Beat); every
// `tick` the thread cancels the calls past their deadline, once each. A worker's call that
// misses its heartbeats (its link cut, its process stopped) is cancelled, which fails its
// pending read and ends it. Thread-safe.
#ifndef PAGODA_ROUTER_LINK_CALL_DEADLINES_H_
#define PAGODA_ROUTER_LINK_CALL_DEADLINES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pagoda {

class CallDeadlines {
 public:
  // One call's deadline. Beat is lock-free: a call beats on every message.
  class Deadline {
   public:
    void Beat(absl::Duration timeout) { at_ns_.store(absl::ToUnixNanos(absl::Now() + timeout)); }
    bool fired() const { return fired_.load(); }

   private:
    friend class CallDeadlines;
    std::atomic<int64_t> at_ns_{0};
    std::atomic<bool> fired_{false};
  };

  explicit CallDeadlines(absl::Duration tick = absl::Milliseconds(200));
  ~CallDeadlines();  // stops the thread; calls still registered are not cancelled

  // Registers a call that must receive something within `timeout`. `cancel` runs on the
  // thread, under its lock, until Remove returns: it must not block (TryCancel does not).
  std::shared_ptr<Deadline> Add(std::function<void()> cancel, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After this returns, the call's `cancel` never runs.
  void Remove(const Deadline* deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  const absl::Duration tick_;
  absl::Mutex mu_;
  struct Entry {
    std::shared_ptr<Deadline> deadline;
    std::function<void()> cancel;
  };
  absl::flat_hash_map<const Deadline*, Entry> calls_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_CALL_DEADLINES_H_
