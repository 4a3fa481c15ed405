// The bounds on request bodies in flight across all of a GuardedHttpServer's connections: sized
// bodies over kSmallBodyBytes share a byte budget, chunked ones (whose size is unknown until read)
// a number of slots. A request takes its share once its head passed every other check, before a
// byte of its body is read, and gives it back when it is served or dropped: a client cannot hold
// memory it has not been granted, and a burst of large bodies waits its turn (503) rather than
// exhausting the process.
//
// Thread-safe: the server's loop admits, its loop and pool threads release.
#ifndef PAGODA_COMMON_PROCESS_BODY_BUDGET_H_
#define PAGODA_COMMON_PROCESS_BODY_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/process/http_head.h"

namespace pagoda {

// A sized body up to this many bytes needs no share of the budget: the head limit and the
// connection cap bound those already.
inline constexpr uint64_t kSmallBodyBytes = 64 << 10;

class BodyBudget {
 public:
  // What one request holds of the budget.
  struct Share {
    uint64_t bytes = 0;         // of max_bytes: a large sized body's Content-Length
    bool chunked_slot = false;  // one of max_chunked
  };

  BodyBudget(uint64_t max_bytes, int max_chunked)
      : max_bytes_(max_bytes), max_chunked_(max_chunked) {}

  // Takes the share of the body `head` announces into `*share` (empty before). Returns null
  // when it fits, else what is full (the reason of a 503), and `*share` stays empty.
  const char* Admit(const HttpHead& head, Share* share);

  // Gives `*share` back and empties it; an empty share is a no-op, so releasing twice is safe.
  void Release(Share* share);

  uint64_t bytes_in_flight() const;
  int chunked_in_flight() const;

 private:
  const uint64_t max_bytes_;
  const int max_chunked_;
  mutable absl::Mutex mu_;
  uint64_t bytes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int chunked_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_BODY_BUDGET_H_
