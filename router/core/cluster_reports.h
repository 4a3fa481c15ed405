// What the Cluster reports: a request's progress to its sink, and its own and its workers'
// figures (ClusterStats, WorkerStats) for the metrics.
#ifndef PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_
#define PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/step.h"
#include "router/core/sequence.h"
#include "router/core/sequence_update.h"

namespace pagoda {

// A request's progress as its sink sees it: one sequence's new tokens or its end.
struct RequestUpdate : SequenceOutput {
  absl::Status error;  // not OK: the request ended without running (e.g. no worker came)
  int worker_id = -1;  // where the sequence ran this step
};
// Called on a worker's loop thread; must not block. Returns false to end that sequence now
// (e.g. its text reached a stop string): its worker drops it within a step.
using RequestSink = std::function<bool(const RequestUpdate&)>;

struct ClusterStats {
  int num_workers = 0;           // connected
  int num_draining_workers = 0;  // of those, shutting down (no new requests)
  int block_size = 0;
  int64_t num_blocks = 0;
  int64_t num_used_blocks = 0;
  int num_running = 0;
  int num_waiting = 0;  // queued in schedulers and waiting for a worker, and not paused
  int num_paused = 0;   // sequences of requests paused at the last Tick (their client not reading)
  // Summed over every worker that ever joined (so they never decrease): steps that ran tokens,
  // their wall time in the router's loop, and the part the workers spent in the forward pass.
  int64_t num_steps = 0;
  double step_seconds = 0;
  double forward_seconds = 0;
  // The worker loops' reports (one or more per step) and, of those, the ones that found the
  // Cluster's lock taken: how long they waited for it (never decrease).
  int64_t num_loop_reports = 0;
  int64_t num_loop_lock_waits = 0;
  double loop_lock_wait_seconds = 0;
};

// One connected worker's state, for per-worker gauges.
// A worker loop's load figures, published after every step (running and waiting also while
// it runs): what placement, the transfer planner and the metrics read.
struct LoopLoad {
  int64_t num_used_blocks = 0;
  int64_t num_slots_used = 0;      // KV slots its running sequences fill ...
  int64_t num_slots_reserved = 0;  // ... of those their block tables hold
  int num_running = 0;
  // In the scheduler or still queued here, and not paused: a paused sequence asks for no
  // work until its client reads (ClusterOptions::max_waiting).
  int num_waiting = 0;
  // Of the scheduler's waiting ones, those waiting after a preemption here: it lacks the
  // blocks they need.
  int num_preempted = 0;
  // Since it started (never decrease): steps that ran tokens, their wall time in this loop
  // and the part the worker spent in the forward pass.
  int64_t num_steps = 0;
  double step_seconds = 0;
  double forward_seconds = 0;
  // Of those, steps of at least kPrefillStepTokens tokens: their forward time and tokens
  // (what computing a prompt costs a token here; issue 28's pull-or-recompute choice).
  static constexpr int kPrefillStepTokens = 64;
  double prefill_forward_seconds = 0;
  int64_t num_prefill_tokens = 0;
  // Prompt tokens its prefix cache was asked for and, of those, found (never decrease).
  int64_t num_prefix_query_tokens = 0;
  int64_t num_prefix_hit_tokens = 0;
  // KV blocks it received from peers by transfer (never decrease).
  int64_t num_transfer_blocks_in = 0;
};

// One connected worker as the metrics see it.
struct WorkerStats {
  int id = 0;
  bool draining = false;
  int64_t num_blocks = 0;
  int block_size = 0;
  std::string kv_cache_dtype;  // "f32", "bf16", ...; "" when the worker did not say
  LoopLoad load;
  // LoRA adapters (issue 39): the most in one step (its --max-loras), and those its running
  // and its waiting sequences name (sorted).
  int max_loras = 0;
  std::vector<std::string> running_adapters = {}, waiting_adapters = {};
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_
