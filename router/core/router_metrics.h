// The router's Prometheus metrics (names as vLLM's, prefixed pagoda_). The Cluster feeds the
// scheduler-side ones (preemptions, prefix cache, queue time, per-worker step time), the
// GenerationService the client-side ones (tokens, TTFT, inter-token latency, end-to-end);
// gauges of the current state are read from the Cluster at scrape time. Every series carries
// the registry's constant labels (the router gives model_name, as vLLM does).
#ifndef PAGODA_ROUTER_CORE_ROUTER_METRICS_H_
#define PAGODA_ROUTER_CORE_ROUTER_METRICS_H_

#include <deque>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/process/metrics.h"

namespace pagoda {

struct RouterMetrics {
  explicit RouterMetrics(MetricsRegistry* registry);

  MetricsRegistry* const registry;  // Not owned.
  Counter* const prompt_tokens;
  Counter* const generation_tokens;
  Counter* const preemptions;
  Counter* const prefix_cache_queries;  // tokens looked up
  Counter* const prefix_cache_hits;     // tokens found
  Histogram* const time_to_first_token;
  Histogram* const inter_token_latency;
  Histogram* const e2e_request_latency;
  Histogram* const request_queue_time;
  // Connections and calls the router turned away, by why: a worker without the cluster's
  // token, a worker whose Hello was refused, a public call without the API key.
  Counter* const refused_worker_token;
  Counter* const refused_worker_hello;
  Counter* const refused_api_key;
  // Calls cancelled because their client read nothing for --stall-timeout-s.
  Counter* const stalled_clients;
  // Calls cancelled because their connection or their client held more paused sequences than
  // --max-paused-per-connection / --max-paused-per-client.
  Counter* const paused_cap_connection;
  Counter* const paused_cap_client;
  Counter* const paused_cap_router;  // --max-paused-sequences
  // Sequences that ended, by vLLM's finished_reason: "stop" (a stop token or string),
  // "length" (max_tokens or the model length), "abort" (cancelled, expired, or failed).
  Counter* const request_success_stop;
  Counter* const request_success_length;
  Counter* const request_success_abort;

  // Speculative decoding (vLLM's spec_decode series): sequence-steps with a draft, the draft
  // tokens, those the worker kept, and those kept at each draft position (0 = the first).
  Counter* const spec_drafts;
  Counter* const spec_draft_tokens;
  Counter* const spec_accepted_tokens;
  Counter* SpecAcceptedAtPosition(int position);  // thread-safe; made on first use

  // KV transfers between workers (issue 28).
  Counter* const kv_transfer_blocks;
  Counter* const kv_transfer_bytes;
  Histogram* const kv_transfer_seconds;
  Counter* const kv_transfer_saved_tokens;
  Counter* const kv_transfer_failures;
  Counter* const kv_migrated_sequences;
  Counter* const recomputed_tokens;

  // Pipeline stages (issue 40), per stage of a group (0 = the first): its step's compute (the
  // worker's forward time less its wait and its send), the bubble (time it waited for the stage
  // before's activations), and what it sent on (bytes; seconds a step).
  struct StageSeries {
    Histogram* compute_seconds;
    Histogram* wait_seconds;
    Counter* sent_bytes;
    Histogram* send_seconds;
  };
  const StageSeries& Stage(int stage);  // thread-safe; made on first use

  void CountFinished(std::string_view finished_reason);

 private:
  absl::Mutex mu_;
  std::vector<Counter*> spec_accepted_per_position_ ABSL_GUARDED_BY(mu_);
  std::deque<StageSeries> stages_ ABSL_GUARDED_BY(mu_);  // deque: references stay valid
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_ROUTER_METRICS_H_
