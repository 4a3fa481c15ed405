// The router's side of KV transfers between workers (issue 28), as pure policy: which worker
// pulls which blocks from which, and what happens when either side leaves. A pull has two
// phases:
//
//   holding:  the source's loop holds the blocks it has of the prefix (Engine::Hold); the
//             request waits here (in the transfer table), counted as waiting
//   pulling:  the request is queued on the destination with a PullPlan; the destination's
//             worker pulls while it steps, then the request runs from the blocks
//
// and ends when the destination reports the pull (OnEvents): the source releases its blocks.
// A failed or refused pull costs only time: the request computes what it lacks. Sequences leave
// a worker with their K/V (OnDetached) when it drains (the running ones) and when it is short
// of blocks (those it preempted, to a worker with room: PreemptedRoom).
//
// The Cluster hands it a snapshot of the workers and applies the actions it returns, in order
// (vLLM's KV connector, scheduler side). It keeps Placement's hints in step with the transfers.
// Thread-compatible, no threads: the Cluster calls it under its lock.
#ifndef PAGODA_ROUTER_TRANSFER_PLANNER_H_
#define PAGODA_ROUTER_TRANSFER_PLANNER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "router/core/engine.h"
#include "router/core/lora_catalog.h"
#include "router/core/placement.h"
#include "router/core/router_metrics.h"
#include "router/core/worker_loop.h"
#include "router/transfer/transfer_cost.h"

namespace pagoda {

// One worker as the planner sees it when the Cluster asks.
struct WorkerView {
  int id = 0;
  bool alive = false;
  bool draining = false;
  const WorkerInfo* info = nullptr;  // Not owned.
  WorkerLoop::Load load = {};        // zero for a dead worker
};

struct TransferSnapshot {
  std::vector<WorkerView> workers = {};  // by id; dead ones stay
  absl::Time now = absl::Now();
  // Which worker holds which LoRA adapter: a sequence moves only to one holding its own. Not
  // owned; null: none holds any.
  const LoraCatalog* loras = nullptr;
};

// What the Cluster does for the planner, in order.
struct TransferAction {
  enum class Kind {
    kHold,     // worker `worker` holds `hold`'s blocks (WorkerLoop::Hold)
    kQueue,    // `work` (with a pull when work->pull is set) goes to `worker`; placed when dead
    kRelease,  // worker `worker` releases `blocks` (held by a Hold or a Detach)
    kPlace,    // `work` is placed again (Cluster::PlaceLocked)
  };
  Kind kind = Kind::kQueue;
  int worker = -1;
  std::optional<QueuedRequest> work = {};
  HoldOrder hold = {};
  std::vector<int> blocks = {};
  bool unassign = false;  // kPlace: the sequence runs nowhere until it is placed
};
using TransferActions = std::vector<TransferAction>;

struct TransferPlannerOptions {
  bool enabled = true;  // off: no worker pulls (WorkerLoad::can_pull is false)
  int min_tokens = 32;  // a prefix pull spares at least this many tokens
  // A request waiting for another worker to hold its prefix waits at most this, and at most
  // kWaitPrefills times what its own worker would take to compute the prefix (as measured):
  // then GiveUpWaiting queues it there to compute it.
  absl::Duration max_wait = absl::Seconds(60);
  RouterMetrics* metrics = nullptr;  // fed when set; not owned
};

// The chained hashes of the request's prompt for blocks of `block_size` (placement's and the
// scheduler's), computed unless the request has them for that size.
void HashPrompt(GenerationRequest* request, int block_size);

class TransferPlanner {
 public:
  // Once waited for, a prefix is cheapest waited for a little longer (its holder may prefill it
  // batched with another prompt, in twice one prompt's time): the wait's bound in prefills.
  static constexpr double kWaitPrefills = 3;

  // `placement` is not owned: its hints follow the transfers (a pull's source has the blocks,
  // its destination once the pull ends).
  TransferPlanner(const ModelConfig& config, const TransferPlannerOptions& options,
                  Placement* placement);

  // Whether `src` and `dst` can move K/V between them: both alive, with transfer addresses,
  // the same block size and KV dtype.
  static bool CanTransfer(const TransferSnapshot& s, int src, int dst);
  // Blocks `dst` could take for sequences moved there now: half its free blocks, none while
  // requests wait there (or it drains, or cannot transfer with `src`).
  static int64_t MoveRoom(const TransferSnapshot& s, int src, int dst);
  // Placement's view of the workers `admit` accepts, in id order; with `count_transfers`, the
  // requests waiting in transfers to a worker count as queued there (else a worker that pulls
  // looks idle and draws every request that wants the same prefix).
  std::vector<WorkerLoad> Candidates(const TransferSnapshot& s,
                                     absl::FunctionRef<bool(const WorkerView&)> admit,
                                     bool count_transfers) const;

  // Placement chose `chosen` for `*work`; `owners` are its hints from before the choice. When
  // another worker has more of the prompt and pulling it pays: takes the work (it waits for
  // that worker to hold the blocks, or follows a transfer of the same prefix to `chosen`),
  // appends the actions to `out` and returns true. False: queue it as usual.
  bool StartPull(const TransferSnapshot& s, int chosen,
                 std::span<const Placement::OwnerList> owners, QueuedRequest* work,
                 TransferActions* out);
  // Worker `worker_id` held blocks for a peer or ended pulls.
  TransferActions OnEvents(const TransferSnapshot& s, int worker_id, const TransferEvents& events);
  // Worker `worker_id` took `d` out (Detach, DetachPreempted); `work` resumes it, or is empty
  // when the sequence is no longer the worker's (it finished, moved or was aborted). It moves
  // with its K/V where a worker can take it; a preempted one only where it and as many tokens
  // again fit (MoveRoom less `taken`, the blocks earlier moves of the batch need, by worker).
  TransferActions OnDetached(const TransferSnapshot& s, int worker_id, Scheduler::Detached d,
                             std::optional<QueuedRequest> work,
                             absl::flat_hash_map<int, int64_t>* taken);
  // The blocks of sequences waiting after a preemption that worker `worker_id` should hand
  // over (WorkerLoop::DetachPreempted), when another has room for them; 0: none.
  int PreemptedRoom(const TransferSnapshot& s, int worker_id) const;
  // The holding requests past their give-up time go to their destinations, to compute.
  TransferActions GiveUpWaiting(absl::Time now);
  // Worker `worker_id` left (`s` says it is dead): the transfers it was part of end, their
  // blocks released and their requests placed again.
  TransferActions EndTransfersOf(const TransferSnapshot& s, int worker_id);
  // The request ended: it no longer waits in a transfer. Its followers go to the destination.
  TransferActions EndRequest(int64_t request_id);

  // Requests waiting in transfers (holding ones and followers) for `dst` (-1: any).
  int NumWaiting(int dst) const;
  int num_transfers() const { return static_cast<int>(transfers_.size()); }
  const TransferCost& cost() const { return cost_; }

 private:
  struct Transfer {
    int src = -1, dst = -1;
    // While the source holds the blocks (Hold): the request, queued when it answers.
    std::optional<QueuedRequest> work;
    absl::Time give_up_at;               // while holding: then the request computes the prefix
    std::vector<int> src_blocks;         // held on the source until the pull ends
    std::vector<uint64_t> block_hashes;  // of the blocks that move
    // Later requests for the same prefix on the same destination: queued there when the
    // transfer ends (the blocks are then cached there), not pulled again.
    std::vector<QueuedRequest> followers;
  };
  // `work` to `dst` with a pull of `src_blocks` (held on `src`), which hold the first
  // `num_tokens` of `tokens` (the last block partly, for a moved sequence).
  void QueuePull(const TransferSnapshot& s, QueuedRequest work, int src, int dst,
                 std::vector<int> src_blocks, std::span<const int> tokens, int num_tokens,
                 std::vector<QueuedRequest> followers, TransferActions* out);
  // K/V bytes of one block on a worker like `info`.
  int64_t BytesPerBlock(const WorkerInfo& info) const;

  const int64_t kv_rows_per_token_;  // K and V over all layers and KV heads
  const int head_dim_;
  const TransferPlannerOptions options_;
  Placement* const placement_;  // Not owned.
  absl::flat_hash_map<int64_t, Transfer> transfers_;
  int64_t next_transfer_id_ = 1;
  TransferCost cost_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_TRANSFER_PLANNER_H_
