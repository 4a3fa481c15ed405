#include "router/core/router_metrics.h"

#include <string>

namespace pagoda {
namespace {
constexpr char kRefusedHelp[] = "Connections and calls refused at the boundary, by reason.";
}  // namespace

RouterMetrics::RouterMetrics(MetricsRegistry* r)
    : registry(r),
      prompt_tokens(r->AddCounter("pagoda_prompt_tokens_total", "Prompt tokens of requests.")),
      generation_tokens(
          r->AddCounter("pagoda_generation_tokens_total", "Tokens generated and streamed.")),
      preemptions(r->AddCounter("pagoda_num_preemptions_total",
                                "Sequences preempted (their KV dropped, to be recomputed).")),
      prefix_cache_queries(r->AddCounter("pagoda_prefix_cache_queries_total",
                                         "Prompt tokens looked up in the prefix cache.")),
      prefix_cache_hits(r->AddCounter("pagoda_prefix_cache_hits_total",
                                      "Prompt tokens found in the prefix cache.")),
      time_to_first_token(r->AddHistogram("pagoda_time_to_first_token_seconds",
                                          "From the call's arrival to its first token.",
                                          LatencyBuckets())),
      inter_token_latency(r->AddHistogram("pagoda_inter_token_latency_seconds",
                                          "Between consecutive tokens of a sequence.",
                                          LatencyBuckets())),
      e2e_request_latency(r->AddHistogram("pagoda_e2e_request_latency_seconds",
                                          "From the call's arrival to its last token.",
                                          LatencyBuckets())),
      request_queue_time(r->AddHistogram("pagoda_request_queue_time_seconds",
                                         "A sequence's wait in its scheduler's queue.",
                                         LatencyBuckets())),
      refused_worker_token(
          r->AddCounter("pagoda_refused_total", kRefusedHelp, {{"reason", "worker_token"}})),
      refused_worker_hello(
          r->AddCounter("pagoda_refused_total", kRefusedHelp, {{"reason", "worker_hello"}})),
      refused_api_key(r->AddCounter("pagoda_refused_total", kRefusedHelp, {{"reason", "api_key"}})),
      stalled_clients(r->AddCounter("pagoda_stalled_clients_total",
                                    "Calls cancelled: their client read nothing for too long.")),
      paused_cap_connection(r->AddCounter(
          "pagoda_paused_cancelled_total",
          "Paused calls cancelled: their connection or client held too many paused sequences.",
          {{"cap", "connection"}})),
      paused_cap_client(r->AddCounter("pagoda_paused_cancelled_total", "", {{"cap", "client"}})),
      paused_cap_router(r->AddCounter("pagoda_paused_cancelled_total", "", {{"cap", "router"}})),
      request_success_stop(r->AddCounter("pagoda_request_success_total",
                                         "Sequences finished, by finished_reason.",
                                         {{"finished_reason", "stop"}})),
      request_success_length(
          r->AddCounter("pagoda_request_success_total", "", {{"finished_reason", "length"}})),
      request_success_abort(
          r->AddCounter("pagoda_request_success_total", "", {{"finished_reason", "abort"}})),
      spec_drafts(r->AddCounter("pagoda_spec_decode_num_drafts_total",
                                "Speculative decoding: sequence steps that verified a draft.")),
      spec_draft_tokens(r->AddCounter("pagoda_spec_decode_num_draft_tokens_total",
                                      "Speculative decoding: draft tokens verified.")),
      spec_accepted_tokens(r->AddCounter("pagoda_spec_decode_num_accepted_tokens_total",
                                         "Speculative decoding: draft tokens kept.")),
      kv_transfer_blocks(r->AddCounter("pagoda_kv_transfer_blocks_total",
                                       "KV blocks pulled from one worker into another.")),
      kv_transfer_bytes(
          r->AddCounter("pagoda_kv_transfer_bytes_total", "K/V bytes pulled between workers.")),
      kv_transfer_seconds(r->AddHistogram("pagoda_kv_transfer_seconds",
                                          "One pull between workers, start to end.",
                                          LatencyBuckets())),
      kv_transfer_saved_tokens(
          r->AddCounter("pagoda_kv_transfer_saved_tokens_total",
                        "Tokens whose K/V came from another worker instead of being computed.")),
      kv_transfer_failures(r->AddCounter("pagoda_kv_transfer_failures_total",
                                         "Pulls that failed; their tokens were computed instead.")),
      kv_migrated_sequences(
          r->AddCounter("pagoda_kv_migrated_sequences_total",
                        "Sequences moved to another worker with their K/V: a draining "
                        "worker's, and those a worker short of blocks preempted.")),
      recomputed_tokens(r->AddCounter(
          "pagoda_recomputed_tokens_total",
          "Tokens computed again that a sequence had computed before (after a preemption, a "
          "failover, or a move without K/V).")) {}

Counter* RouterMetrics::SpecAcceptedAtPosition(int position) {
  absl::MutexLock lock(&mu_);
  while (static_cast<int>(spec_accepted_per_position_.size()) <= position) {
    const int i = static_cast<int>(spec_accepted_per_position_.size());
    spec_accepted_per_position_.push_back(
        registry->AddCounter("pagoda_spec_decode_num_accepted_tokens_per_pos_total",
                             "Speculative decoding: draft tokens kept, by position in the draft.",
                             {{"position", std::to_string(i)}}));
  }
  return spec_accepted_per_position_[position];
}

const RouterMetrics::StageSeries& RouterMetrics::Stage(int stage) {
  absl::MutexLock lock(&mu_);
  while (static_cast<int>(stages_.size()) <= stage) {
    const MetricLabels label = {{"stage", std::to_string(stages_.size())}};
    stages_.push_back({
        .compute_seconds = registry->AddHistogram(
            "pagoda_stage_compute_seconds",
            "Pipeline stages: a step's compute on the stage (less its wait and its send).",
            LatencyBuckets(), label),
        .wait_seconds = registry->AddHistogram(
            "pagoda_stage_wait_seconds",
            "Pipeline stages: a step's wait for the stage before's activations (the bubble).",
            LatencyBuckets(), label),
        .sent_bytes = registry->AddCounter(
            "pagoda_stage_sent_bytes_total",
            "Pipeline stages: activation bytes sent to the next stage.", label),
        .send_seconds = registry->AddHistogram(
            "pagoda_stage_send_seconds",
            "Pipeline stages: a step's send of its activations to the next stage.",
            LatencyBuckets(), label),
    });
  }
  return stages_[stage];
}

void RouterMetrics::CountFinished(std::string_view finished_reason) {
  if (finished_reason == "stop") {
    request_success_stop->Add(1);
  } else if (finished_reason == "length") {
    request_success_length->Add(1);
  } else {
    request_success_abort->Add(1);
  }
}

}  // namespace pagoda
