// The Cluster's registry of requests: what each request delivered so far, where each of its
// sequences runs, and its sink. Delivery keeps a request's updates in order and counts its
// sequences down to the end; a sequence that must go on elsewhere is rebuilt from what it
// delivered (Resumed), which counter-based sampling continues identically.
//
//   Add ─▶ Assign(worker) ─▶ Deliver … Deliver(finished) ─▶ erased
//                  └─ its worker dies or drains ─▶ TakeSequencesOn / ResumeIfOn ─▶ Assign again
//
// Not thread-safe: the Cluster holds it under its mu_. Record notes an update under that lock
// and hands it back with its turn (OrderedSink) for the Cluster to deliver after releasing the
// lock, so the output path of every request runs outside it; End and Refuse call the sink at
// once, in turn after the updates recorded before. A sink's owner must therefore stop its sink
// itself when it goes (GenerationStream::Abort does), not rely on the lock.
#ifndef PAGODA_ROUTER_CORE_REQUEST_TABLE_H_
#define PAGODA_ROUTER_CORE_REQUEST_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "router/core/cluster_reports.h"
#include "router/core/ordered_sink.h"
#include "router/core/paused_caps.h"
#include "router/core/sequence_update.h"
#include "router/core/worker_loop.h"

namespace pagoda {

class RequestTable {
 public:
  // Registers a request (validated) and returns its id; its sequences run nowhere yet.
  int64_t Add(const GenerationRequest& request, RequestSink sink, absl::Time give_up_at);
  bool contains(int64_t request_id) const { return requests_.contains(request_id); }
  int size() const { return static_cast<int>(requests_.size()); }

  // Records that `work`'s sequences run on `worker_id` (-1: nowhere yet).
  void Assign(const QueuedRequest& work, int worker_id);
  // The workers the request's unfinished-or-not sequences were placed on (-1: nowhere), or
  // empty when it is unknown.
  std::vector<int> WorkersOf(int64_t request_id) const;
  // Unfinished sequences placed on the worker.
  int NumHeldBy(int worker_id) const;
  // Requests running or waiting under the LoRA adapter `adapter`.
  int NumUsing(std::string_view adapter) const;

  // What Deliver asks of the worker that sent the update.
  enum class Delivered {
    kDone,           // nothing more to do
    kAbortSequence,  // the sink wants no more of this sequence: abort it there
  };
  // An update recorded, for its request's sink: `sink` is null when there is nothing to deliver.
  struct Recorded {
    std::shared_ptr<OrderedSink> sink;
    uint64_t ticket = 0;
    int64_t request_id = 0;
    RequestUpdate update;
  };
  // Records an update from `worker_id` (its tokens, and its sequence's end: a request whose
  // every sequence finished is erased) and takes its turn. Unknown requests (aborted) and
  // empty updates are not delivered.
  Recorded Record(int worker_id, const SequenceUpdate& update);
  // The sink wants no more of sequence `seq_index`: it counts as finished (the request is
  // erased once none runs). Returns the worker it was placed on (-1: nowhere), to abort it
  // there; nullopt when it had finished or the request is unknown.
  std::optional<int> StopSequence(int64_t request_id, int seq_index);
  // Record, the sink at once, and StopSequence when it says so (for callers that hold no lock
  // a sink would wait for: tests).
  Delivered Deliver(int worker_id, const SequenceUpdate& update);
  // Ends a request: its sink gets `error` as its last update unless `error` is OK; returns the
  // workers its sequences were placed on (to abort there), nullopt when it is unknown.
  std::optional<std::vector<int>> End(int64_t request_id, const absl::Status& error);
  // A worker refused the request (it can never run there): its sink gets an abort.
  void Refuse(int64_t request_id);

  // The unfinished sequences placed on a worker that left, as work to place elsewhere (each
  // from the tokens it delivered), except those of requests `still_queued` says never started
  // there. They run nowhere until assigned again.
  std::vector<QueuedRequest> TakeSequencesOn(
      int worker_id, const std::function<bool(int64_t request_id)>& still_queued);
  // Sequence `seq_index` of the request, to go on elsewhere, when it is unfinished on
  // `worker_id`; nullopt otherwise (it finished, moved or was aborted).
  std::optional<QueuedRequest> ResumeIfOn(int64_t request_id, int seq_index, int worker_id) const;

  // Of `parked`, the requests whose give_up_at is at or before `now`.
  std::vector<int64_t> Expired(const std::vector<int64_t>& parked, absl::Time now) const;
  // The paused-request rule (ReviewPaused) over every request but `skip`.
  PauseReview ReviewPaused(absl::Time now, absl::Duration stall_timeout, const PausedCaps& caps,
                           const std::vector<int64_t>& skip);

 private:
  struct Request {
    GenerationRequest request;
    std::shared_ptr<OrderedSink> sink;
    std::vector<std::vector<int>> outputs;  // (n) tokens delivered so far
    std::vector<bool> finished;             // (n)
    std::vector<int> worker;                // (n) where each sequence runs, -1 while parked
    int num_unfinished = 0;
    absl::Time give_up_at;  // while parked, UNAVAILABLE after this
    // Since when each review has seen request.paused set (InfiniteFuture: not paused at the last).
    absl::Time paused_since = absl::InfiniteFuture();
  };
  static QueuedRequest Resumed(int64_t request_id, const Request& r, int seq_index);

  absl::node_hash_map<int64_t, Request> requests_;  // nodes: a sink may see its request move
  int64_t next_request_id_ = 1;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_REQUEST_TABLE_H_
