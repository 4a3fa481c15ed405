// What the Cluster reports: a request's progress to its sink, and its own and its workers'
// figures (ClusterStats, WorkerStats) for the metrics.
#ifndef PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_
#define PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/step.h"
#include "router/core/sequence.h"

namespace pagoda {

// A request's progress as its sink sees it: one sequence's new tokens or its end.
struct RequestUpdate {
  absl::Status error;  // not OK: the request ended without running (e.g. no worker came)
  int worker_id = -1;  // where the sequence ran this step
  int seq_index = 0;
  std::vector<int> token_ids;
  std::vector<SampledToken> samples;
  std::shared_ptr<const PromptLogprobs> prompt_logprobs;  // with the first token, when asked
  std::vector<float> embedding;                           // an embedding's, with its end
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  bool grammar_complete = false;  // SequenceUpdate's: the last token is text, not a stop token
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;
  int num_cached_tokens = 0;
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
struct WorkerStats {
  int id = 0;
  bool draining = false;
  int64_t num_blocks = 0;
  int64_t num_used_blocks = 0;
  int64_t num_slots_used = 0;      // KV slots its running sequences fill ...
  int64_t num_slots_reserved = 0;  // ... of those their block tables hold
  int block_size = 0;
  int num_running = 0;
  int num_waiting = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_CLUSTER_REPORTS_H_
