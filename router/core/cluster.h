// The router's core over many workers (DESIGN §1, §3, §5), plain C++ with no gRPC: the
// membership of the workers, the registry of requests and the delivery of their tokens. Each
// worker has a WorkerLoop (its Engine on its own thread), so all workers step in parallel;
// Placement chooses where a request goes.
//
//   Validate ─ Submit ─ Placement ─▶ WorkerLoop inbox ─▶ Engine::Step() ─▶ Deliver ─▶ sinks
//
// A worker whose Execute fails is dead: its unfinished sequences are resubmitted elsewhere with
// the tokens generated so far; counter-based sampling makes their continuation identical.
// Thread-safe, with two locks (order: place_mu_, then mu_, then a WorkerLoop's own):
//
//   place_mu_  where work goes: the workers (membership, draining), Placement's hints, the
//              parked requests and the TransferPlanner. Submit, Tick, Abort, a worker joining,
//              draining or leaving, and a worker's transfer reports take it.
//   mu_        the request registry (RequestTable): each request's delivered tokens and where
//              its sequences run. A worker loop's after-step report (OnUpdates) records its
//              updates under this one only, so it never waits while the router places a request
//              or plans a transfer for another worker, and calls the sinks after releasing it
//              (in each request's order: OrderedSink), so the output path (detokenizing, the
//              transport's write) of one worker's step never holds up another's report (issue 38).
//              A sink's owner stops its sink itself when it goes (GenerationStream::Abort); a
//              request that ends early (Abort, a Tick's expiry) has its sink called under mu_.
//              Work under place_mu_ takes mu_ only to register a request or record where a
//              sequence went.
#ifndef PAGODA_ROUTER_CORE_CLUSTER_H_
#define PAGODA_ROUTER_CORE_CLUSTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "router/core/cluster_reports.h"
#include "router/core/engine.h"
#include "router/core/lora_catalog.h"
#include "router/core/paused_caps.h"
#include "router/core/placement.h"
#include "router/core/request_table.h"
#include "router/core/router_metrics.h"
#include "router/core/timed_lock.h"
#include "router/core/worker_limits.h"
#include "router/core/worker_loop.h"
#include "router/core/worker_set.h"
#include "router/transfer/planner.h"

namespace pagoda {

struct ClusterOptions {
  EngineOptions engine;
  WorkerLimits worker_limits;
  PlacementPolicy placement = PlacementPolicy::kPrefixAware;
  double prefix_weight = 1.0;  // w in the placement cost (Placement)
  // Requests queued beyond this fail with RESOURCE_EXHAUSTED. Paused sequences (their client
  // is not reading) do not count: they ask nothing of a worker until their client reads again,
  // so counting them would let a client that never reads refuse everyone else's requests;
  // the paused caps and stall_timeout bound them instead.
  int max_waiting = 1024;
  // A request paused this long (its client read nothing: GenerationRequest::paused) ends with
  // DEADLINE_EXCEEDED at a Tick. Its sequences hold no KV meanwhile once a waiting request
  // needs it (the scheduler preempts paused ones).
  absl::Duration stall_timeout = absl::Seconds(60);
  // Paused sequences per connection and per client (GenerationRequest::peer): past a cap, a
  // Tick ends the oldest paused requests there with RESOURCE_EXHAUSTED (OverPausedCaps).
  PausedCaps paused_caps{.max_per_connection = 64, .max_per_client = 256, .max_total = 4096};
  RouterMetrics* metrics = nullptr;  // fed when set; not owned
  // KV transfers between workers (issue 28), between workers that advertise a transfer
  // address and hold K/V alike (block size, dtype). A request placed away from the worker that
  // has its prompt's prefix pulls the prefix when that beats computing it (TransferCost) and it
  // is at least kv_transfer_min_tokens; a draining worker's running sequences move with their
  // K/V, and so do sequences preempted on a worker short of blocks, to one with room (rather
  // than wait there). Off: every worker computes what it lacks.
  bool kv_transfer = true;
  int kv_transfer_min_tokens = 32;
  // A request waiting for another worker to hold (or first compute) its prefix waits at most
  // this, and at most TransferPlanner::kWaitPrefills times what its own worker would take to
  // compute the prefix (as measured): then a Tick queues it there to compute it. Only a stuck
  // or swamped holder should hit it.
  absl::Duration kv_transfer_max_wait = absl::Seconds(60);
};

class Cluster final : private WorkerLoopListener {
 public:
  explicit Cluster(const ModelConfig& config, const ClusterOptions& options);
  ~Cluster();  // stops every loop

  // Adds a worker and starts its loop. The executor is shared with its transport.
  // INVALID_ARGUMENT when its Hello is out of range (ValidateWorkerInfo) or its model differs
  // from the router's (the message does not reveal the router's fingerprint);
  // RESOURCE_EXHAUSTED when max_workers are connected, or when its blocks would take the live
  // workers' past max_total_blocks.
  absl::StatusOr<int> AddWorker(std::shared_ptr<Executor> executor);
  // Marks a worker dead (its stream broke): its loop resubmits its sequences and exits.
  void RemoveWorker(int worker_id);
  // Starts draining a worker (it is shutting down): no new request is placed on it, those
  // queued there but not started move to other workers when there are any, and the sequences
  // it runs finish there (or, with kv_transfer, move with their K/V). `on_drained` runs once, on
  // the worker's loop thread, when it holds nothing more. If the worker dies first, its sequences
  // move as usual.
  void DrainWorker(int worker_id, std::function<void()> on_drained);

  // INVALID_ARGUMENT naming the field when `request` can never run here (ValidateRequest): the
  // one check of a request's content. A transport calls it before it allocates anything.
  absl::Status Validate(const GenerationRequest& request) const;
  // Queues a request; `sink` gets every update until each sequence finished. A request still
  // waiting for a worker at `give_up_at` ends with UNAVAILABLE (see Tick). RESOURCE_EXHAUSTED
  // when max_waiting requests wait.
  // REQUIRES: Validate(request) is OK. Submit re-checks only what costs O(1)
  // (ValidateRequestLimits: n, lengths, sampling ranges), so a caller that skipped Validate
  // still gets INVALID_ARGUMENT, never a crash, for those; token ids are Validate's alone.
  absl::StatusOr<int64_t> Submit(const GenerationRequest& request, RequestSink sink,
                                 absl::Time give_up_at = absl::InfiniteFuture());
  // Ends the requests that waited for a worker past their give_up_at, those paused for
  // stall_timeout (seen paused at every Tick since), and the oldest paused past a paused cap;
  // queues to compute the requests that waited too long for a peer's prefix
  // (kv_transfer_max_wait). Call it periodically.
  void Tick(absl::Time now);
  // Ends the request's sequences and frees their blocks. Its sink gets nothing more.
  void Abort(int64_t request_id);
  // Its client reads again: wakes the loops of the workers that hold the request, which were
  // idle if all they held was paused (GenerationRequest::paused).
  void Resume(int64_t request_id);

  ClusterStats stats() const;
  std::vector<WorkerStats> worker_stats() const;  // connected workers
  const ModelConfig& config() const { return config_; }
  RouterMetrics* metrics() const { return options_.metrics; }  // may be null
  // Loads (change.path set) or unloads a LoRA adapter on every live worker
  // (LoraCatalog::Change); `done` runs on a loop's thread, or here when no worker is live or
  // the unload is refused: FAILED_PRECONDITION while requests of the adapter are in flight.
  void ChangeAdapter(const AdapterChange& change, std::function<void(absl::Status)> done);
  // Its workers' LoRA adapters: a request naming one is placed only on a worker holding it.
  LoraCatalog& loras() { return loras_; }
  const LoraCatalog& loras() const { return loras_; }
  int max_model_len() const;
  int max_n() const { return options_.engine.max_n; }  // samples per request at most

 private:
  // WorkerLoopListener, on a worker's loop thread.
  void OnUpdates(int worker_id, const std::vector<SequenceUpdate>& updates) override
      ABSL_LOCKS_EXCLUDED(place_mu_, mu_);
  void OnRefused(int worker_id, int64_t request_id) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnFailed(int worker_id) override ABSL_LOCKS_EXCLUDED(place_mu_, mu_);
  void OnTransfers(int worker_id, const TransferEvents& events) override
      ABSL_LOCKS_EXCLUDED(place_mu_, mu_);
  void OnDetached(int worker_id, std::vector<Scheduler::Detached> detached) override
      ABSL_LOCKS_EXCLUDED(place_mu_, mu_);

  // The *Locked methods below hold place_mu_, never mu_: they take it to touch the registry.

  // KV transfers (issue 28): the planner's view of the workers now, and its actions done.
  TransferSnapshot SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  void ApplyLocked(TransferActions actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // Queues `work` on live worker `dst` as it is (with its pull, if any), else places it again.
  void QueueLocked(QueuedRequest work, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // Records in the registry that work's sequences run on `worker_id` (-1: nowhere yet).
  void AssignLocked(const QueuedRequest& work, int worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // When a worker has sequences waiting after a preemption and another has room for them,
  // asks it to hand them over (OnDetached moves them with the blocks they had computed).
  void MovePreemptedLocked(int worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);

  // Marks a worker dead and requeues every unfinished sequence that was on it.
  void RemoveLocked(WorkerSet::Worker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // Chooses a live worker for `work` and queues it there (or parks it). New requests never go
  // to a draining worker; resumed sequences may, rather than wait.
  void PlaceLocked(QueuedRequest work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // Ends a request with `error` (its sink's last update) and frees what it holds.
  void EndLocked(int64_t request_id, const absl::Status& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);
  // Requests queued in the router, in schedulers or in loops' inboxes, not yet running.
  int NumWaitingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(place_mu_);

  // Constant after construction.
  const ModelConfig config_;
  const ClusterOptions options_;

  mutable absl::Mutex place_mu_;
  WorkerSet workers_ ABSL_GUARDED_BY(place_mu_);
  std::deque<QueuedRequest> parked_ ABSL_GUARDED_BY(place_mu_);  // waiting for a live worker
  Placement placement_ ABSL_GUARDED_BY(place_mu_);
  TransferPlanner planner_ ABSL_GUARDED_BY(place_mu_);  // after placement_, whose hints it keeps

  mutable absl::Mutex mu_;
  RequestTable requests_ ABSL_GUARDED_BY(mu_);
  // Each worker's loop by id while its reports are delivered; null once it left (its sequences
  // moved). Set with place_mu_ held too, as workers_ changes.
  std::vector<WorkerLoop*> reporting_ ABSL_GUARDED_BY(mu_);
  int num_paused_ ABSL_GUARDED_BY(mu_) = 0;  // sequences, at the last Tick

  LockWaits loop_waits_;  // the loops' waits for either lock (ClusterStats), counted outside
  LoraCatalog loras_;     // thread-safe
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_CLUSTER_H_
