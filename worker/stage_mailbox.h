// The receiving end of a pipeline stage's link (issue 40): the previous stage's residual
// streams, by step id, until the step that needs each takes it. The transport puts what
// arrives (a gRPC handler thread); the worker's step takes it (its loop thread). Bounded: a
// stage that sends ahead of its steps, or a step id no step will take, cannot grow it past
// max_pending entries (the oldest is dropped, and its step times out).
#ifndef PAGODA_WORKER_STAGE_MAILBOX_H_
#define PAGODA_WORKER_STAGE_MAILBOX_H_

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pagoda {

class StageMailbox {
 public:
  explicit StageMailbox(int max_pending = 8) : max_pending_(max_pending) {}

  // Keeps `hidden` for step `step_id` (a later Put of the same id replaces it).
  void Put(int64_t step_id, std::vector<float> hidden) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `timeout` for step `step_id`'s stream, then moves it into `out`.
  // DEADLINE_EXCEEDED if none came; INVALID_ARGUMENT (and it is dropped) if its size is not
  // out's; CANCELLED once Close()d.
  absl::Status Take(int64_t step_id, std::span<float> out, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes every Take with CANCELLED, now and later (the worker is going).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes the Takes waiting now with CANCELLED (the router's call ended mid-step: the step they
  // serve is abandoned); later Takes wait as usual.
  void Interrupt() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops everything pending (a new router connection: its step ids start again).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);
  int num_pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int max_pending_;
  mutable absl::Mutex mu_;
  std::map<int64_t, std::vector<float>> pending_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t interrupts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_STAGE_MAILBOX_H_
