// One worker's loop (DESIGN §3): a thread that owns the worker's Engine, moves the messages
// queued for it (requests, aborts, transfer orders) into the engine in the order they came,
// steps it while it has work, and reports every step to its listener:
//
//   wait for work → mailbox into the Engine → Step() → publish load → listener
//
// Thread-safe: any thread queues work and reads the load figures; only the loop's thread
// touches the Engine. Callers may hold their own lock when they call in (the Cluster does); the
// loop calls its listener with none of its own locks held, so that order never inverts.
#ifndef PAGODA_ROUTER_CORE_WORKER_LOOP_H_
#define PAGODA_ROUTER_CORE_WORKER_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "router/core/cluster_reports.h"
#include "router/core/engine.h"
#include "router/core/router_metrics.h"

namespace pagoda {

// One request for a worker's engine: a client's request, or one resumed sequence of it.
struct QueuedRequest {
  int64_t request_id = 0;
  GenerationRequest request;
  std::optional<PullPlan> pull;  // pull these blocks from a peer first (issue 28)
};

// How a loop reports to its owner. Called on the loop's thread; must not block on the loop.
class WorkerLoopListener {
 public:
  virtual ~WorkerLoopListener() = default;
  // A step's updates, in order.
  virtual void OnUpdates(int worker_id, const std::vector<SequenceUpdate>& updates) = 0;
  // The engine refused a request that passed ValidateRequest: a limit of this worker (its pool).
  // The loop has logged why.
  virtual void OnRefused(int worker_id, int64_t request_id) = 0;
  // A step failed: the worker is broken. The loop exits right after this returns, with no
  // further report; what it had not started is still there for TakeQueued.
  virtual void OnFailed(int worker_id) = 0;
  // KV transfers (issue 28): blocks held for a peer, pulls that ended.
  virtual void OnTransfers(int /*worker_id*/, const TransferEvents& /*events*/) {}
  // The sequences Detach() or DetachPreempted() took out, their blocks held here until
  // released.
  virtual void OnDetached(int /*worker_id*/, std::vector<Scheduler::Detached> /*detached*/) {}
};

class WorkerLoop {
 public:
  // Starts the loop's thread. The executor is shared with the worker's transport; `listener`
  // and `metrics` (fed when not null) are not owned and must outlive the loop. `cached`: the
  // blocks the worker's pool holds (validated: ValidateCachedBlocks), cached again before the
  // first step.
  WorkerLoop(int id, std::shared_ptr<Executor> executor, const ModelConfig& config,
             const EngineOptions& options, RouterMetrics* metrics, WorkerLoopListener* listener,
             std::span<const CachedBlock> cached = {});
  // The chained hashes of the blocks cached from `cached`, once (for Placement's hints).
  std::vector<uint64_t> TakeAdoptedHashes() { return std::exchange(adopted_hashes_, {}); }
  ~WorkerLoop();  // Stop() and Join()

  int id() const { return id_; }
  const WorkerInfo& info() const { return info_; }

  // Queues a request. REQUIRES: ValidateRequest passed it for this model (see OnRefused).
  void Add(QueuedRequest request);
  // Ends one sequence of a request (or, with seq_index -1, all of them) and frees its blocks.
  void Abort(int64_t request_id, int seq_index = -1);
  // A paused request it holds may run again (GenerationRequest::paused): wakes an idle loop.
  void Resume();
  // Runs `on_drained` once, on the loop's thread, when it holds nothing and nothing is queued
  // (no sequence, and no block held for a peer).
  void Drain(std::function<void()> on_drained);
  // KV transfers (issue 28), carried out at the loop's next wake, between steps.
  void Hold(HoldOrder order);             // answered by OnTransfers
  void Release(std::vector<int> blocks);  // blocks held by Hold or Detach
  void Detach();                          // running sequences; answered by OnDetached
  // Sequences waiting after a preemption, whose blocks sum to at most `max_blocks`
  // (Scheduler::DetachPreempted); answered by OnDetached.
  void DetachPreempted(int max_blocks);
  // Loads or unloads a LoRA adapter on the worker at the loop's next wake, between steps
  // (Executor::ChangeAdapter); `done` gets the answer on the loop's thread, and an error when
  // the loop ends first.
  using AdapterDone = std::function<void(absl::StatusOr<AdapterInfo>)>;
  void ChangeAdapter(AdapterChange change, AdapterDone done);
  // Takes back the requests queued here that the loop has not taken into the engine yet.
  std::deque<QueuedRequest> TakeQueued();
  // Ends the loop at its next wake, with no further report; it drops its engine's sequences.
  void Stop();
  // Whether the loop has ended: then Join() returns at once.
  bool exited() const;
  // Waits for the thread to end and lets go of the executor. REQUIRES: Stop() was called, or
  // the listener heard OnFailed.
  void Join();

  // Load figures, published after every step (running and waiting also while it runs).
  using Load = LoopLoad;

  Load load() const;
  // The LoRA adapters its running and its waiting sequences name, after the last step (each
  // sorted; empty for a worker without adapters).
  struct Adapters {
    std::vector<std::string> running, waiting;
  };
  Adapters adapters() const;

 private:
  // The messages of its mailbox, one per call that queues work.
  struct AbortOrder {
    int64_t request_id;
    int seq_index;  // -1: every sequence of the request
  };
  struct ResumeOrder {};  // only wakes the loop
  struct ReleaseOrder {
    std::vector<int> blocks;
  };
  struct DetachOrder {};
  struct DetachPreemptedOrder {
    int max_blocks;
  };
  struct AdapterOrder {
    AdapterChange change;
    AdapterDone done;
  };
  using Message = std::variant<QueuedRequest, AbortOrder, ResumeOrder, HoldOrder, ReleaseOrder,
                               DetachOrder, DetachPreemptedOrder, AdapterOrder>;
  // What a batch of messages leaves for after it: detaches are done once per batch, after its
  // aborts, with the most blocks any DetachPreempted asked for.
  struct Batch {
    bool detach = false;
    int detach_preempted_blocks = 0;
    bool held = false;  // a Hold came: answer the ready ones before the step
  };

  void Run();
  // Carries one message into the engine (the loop's thread).
  void Handle(Message message, Batch* batch);
  // Queues a message of type T and wakes the loop.
  template <typename T>
  void Post(T message) ABSL_LOCKS_EXCLUDED(mu_);
  // Feeds the metrics and the load figures after a step that started at `step_start`.
  void Publish(const std::vector<SequenceUpdate>& updates, absl::Time step_start);
  // A finished loop holds nothing: its load figures fall to zero (the cumulative ones stay).
  void ClearLoad();
  // Hands the engine's transfer events to the listener, counting the blocks pulled in.
  void ReportTransfers();

  // Constant after construction.
  const int id_;
  const WorkerInfo info_;
  RouterMetrics* const metrics_;          // Not owned; may be null.
  WorkerLoopListener* const listener_;    // Not owned.
  Histogram* step_seconds_ = nullptr;     // this worker's series, when metrics are on
  std::shared_ptr<Executor> executor_;    // shared with the transport; dropped by Join()
  std::unique_ptr<Engine> engine_;        // the loop's thread only, after construction
  std::vector<uint64_t> adopted_hashes_;  // the caller's thread only (TakeAdoptedHashes)
  std::thread thread_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<Message> mailbox_ ABSL_GUARDED_BY(mu_);  // in the order they came
  int num_queued_ ABSL_GUARDED_BY(mu_) = 0;           // of those, requests (QueuedRequest)
  std::function<void()> on_drained_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;

  // The loop's thread only: scheduler counters already added to the metrics.
  int64_t reported_preemptions_ = 0, reported_queries_ = 0, reported_hits_ = 0;
  int64_t reported_recomputed_ = 0;
  SpecDecodeStats reported_spec_;

  // Written by the loop's thread, read by any (num_waiting_ also under mu_, with mailbox_).
  std::atomic<int64_t> num_used_blocks_{0}, num_slots_used_{0}, num_slots_reserved_{0};
  std::atomic<int> num_running_{0}, num_waiting_{0}, num_preempted_{0};
  std::atomic<int64_t> num_steps_{0}, step_micros_{0}, forward_micros_{0};
  std::atomic<int64_t> prefill_forward_micros_{0}, num_prefill_tokens_{0};
  std::atomic<int64_t> num_prefix_query_tokens_{0}, num_prefix_hit_tokens_{0};
  std::atomic<int64_t> num_transfer_blocks_in_{0};
  bool adapters_published_ = false;  // the loop's thread: adapters_ holds a non-empty list
  mutable absl::Mutex adapters_mu_;
  Adapters adapters_ ABSL_GUARDED_BY(adapters_mu_);
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_WORKER_LOOP_H_
