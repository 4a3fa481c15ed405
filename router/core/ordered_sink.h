// One request's sink, called outside the Cluster's lock yet in the order the Cluster recorded
// the request's updates (issue 38: the sinks are the whole output path, detokenizing, stop
// strings and the transport's write, and ran under the lock every worker loop takes after every
// step). The Cluster takes a ticket for each update where it records it (under its lock, so the
// tickets follow the recording order, across a worker change too), and delivers it after
// releasing the lock; a delivery waits for those ticketed before it. Every ticket taken must be
// delivered, or the later ones wait for ever. No deadlock: a delivery waits only for tickets taken
// before its own under the same lock, by threads that deliver without taking that lock.
// Thread-safe.
//
//   uint64_t ticket = sink->Ticket();              // under the Cluster's lock
//   bool go_on = sink->Deliver(ticket, update);    // after releasing it
#ifndef PAGODA_ROUTER_CORE_ORDERED_SINK_H_
#define PAGODA_ROUTER_CORE_ORDERED_SINK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "router/core/cluster_reports.h"

namespace pagoda {

class OrderedSink {
 public:
  explicit OrderedSink(RequestSink sink);

  // The next update's turn.
  uint64_t Ticket();
  // Waits until every update ticketed before `ticket` is delivered, then calls the sink with
  // `update` (one call at a time): whether the sequence goes on.
  bool Deliver(uint64_t ticket, const RequestUpdate& update);

 private:
  const RequestSink sink_;
  absl::Mutex mu_;
  uint64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_ORDERED_SINK_H_
