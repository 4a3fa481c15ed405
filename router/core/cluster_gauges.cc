#include "router/core/cluster_gauges.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace pagoda {

void AddClusterGauges(MetricsRegistry* registry, const Cluster* cluster) {
  using Values = std::vector<std::pair<MetricLabels, double>>;
  registry->AddGaugeFamily("pagoda_num_requests_running", "Sequences running on workers.",
                           [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_running}};
                           });
  registry->AddGaugeFamily("pagoda_num_requests_waiting",
                           "Sequences waiting for a worker or in a scheduler's queue (not paused).",
                           [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_waiting}};
                           });
  registry->AddGaugeFamily("pagoda_num_requests_paused",
                           "Sequences whose client is not reading their output.", [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_paused}};
                           });
  registry->AddGaugeFamily("pagoda_num_workers", "Connected workers (draining ones included).",
                           [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_workers}};
                           });
  // Totals since start (they never decrease): the worker loops' steps and their time, and
  // the Cluster's lock as the loops met it (issue 38: what a fleet of workers costs it).
  const auto total = [registry, cluster](const char* name, const char* help, auto value) {
    registry->AddGaugeFamily(name, help, [cluster, value] {
      return Values{{{}, static_cast<double>(value(cluster->stats()))}};
    });
  };
  total("pagoda_cluster_steps_total", "Steps the worker loops ran that had tokens.",
        [](const ClusterStats& s) { return s.num_steps; });
  total("pagoda_cluster_step_seconds_total",
        "The loops' wall time in those steps (schedule, round trip, results).",
        [](const ClusterStats& s) { return s.step_seconds; });
  total("pagoda_cluster_forward_seconds_total",
        "Of that, what the workers reported as their forward pass.",
        [](const ClusterStats& s) { return s.forward_seconds; });
  total("pagoda_cluster_loop_reports_total", "The worker loops' reports to the Cluster.",
        [](const ClusterStats& s) { return s.num_loop_reports; });
  total("pagoda_cluster_loop_lock_waits_total", "Of those, the ones that found its lock taken.",
        [](const ClusterStats& s) { return s.num_loop_lock_waits; });
  total("pagoda_cluster_loop_lock_wait_seconds_total",
        "The loops' time waiting for the Cluster's locks.",
        [](const ClusterStats& s) { return s.loop_lock_wait_seconds; });
  // vLLM's LoRA gauge, which the Kubernetes Gateway API inference extension reads: the
  // adapters running and waiting over the workers (comma-separated), the most one worker runs
  // in a step, and the time as its value.
  registry->AddGaugeFamily("vllm:lora_requests_info", "Running stats on LoRA requests.", [cluster] {
    std::set<std::string> running, waiting;
    int max_loras = 0;
    for (const WorkerStats& w : cluster->worker_stats()) {
      running.insert(w.running_adapters.begin(), w.running_adapters.end());
      waiting.insert(w.waiting_adapters.begin(), w.waiting_adapters.end());
      max_loras = std::max(max_loras, w.max_loras);
    }
    return Values{{{{"max_lora", std::to_string(max_loras)},
                    {"running_lora_adapters", absl::StrJoin(running, ",")},
                    {"waiting_lora_adapters", absl::StrJoin(waiting, ",")}},
                   absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())}};
  });
  auto per_worker = [cluster](auto value) {
    return [cluster, value] {
      Values out;
      for (const WorkerStats& w : cluster->worker_stats()) {
        out.push_back({{{"worker", std::to_string(w.id)}}, value(w)});
      }
      return out;
    };
  };
  registry->AddGaugeFamily(
      "pagoda_kv_cache_usage", "Fraction of a worker's KV blocks in use (0..1).",
      per_worker([](const WorkerStats& w) {
        return w.num_blocks ? static_cast<double>(w.load.num_used_blocks) / w.num_blocks : 0.0;
      }));
  registry->AddGaugeFamily(
      "pagoda_kv_cache_utilization",
      "KV slots the running sequences fill over the slots their block tables reserve (0..1; 0 "
      "when nothing runs).",
      per_worker([](const WorkerStats& w) {
        return w.load.num_slots_reserved > 0
                   ? static_cast<double>(w.load.num_slots_used) / w.load.num_slots_reserved
                   : 0.0;
      }));
  // Each worker's share of the cluster-wide figures (the web page's cluster view reads them).
  const auto worker_gauge = [registry, &per_worker](const char* name, const char* help,
                                                    auto value) {
    registry->AddGaugeFamily(name, help, per_worker([value](const WorkerStats& w) {
                               return static_cast<double>(value(w));
                             }));
  };
  worker_gauge("pagoda_worker_num_requests_running", "Sequences running on a worker.",
               [](const WorkerStats& w) { return w.load.num_running; });
  worker_gauge("pagoda_worker_num_requests_waiting",
               "Sequences queued for a worker and not admitted yet (not paused).",
               [](const WorkerStats& w) { return w.load.num_waiting; });
  worker_gauge("pagoda_worker_kv_blocks_used", "A worker's KV blocks in use.",
               [](const WorkerStats& w) { return w.load.num_used_blocks; });
  worker_gauge("pagoda_worker_kv_blocks", "A worker's KV blocks in all.",
               [](const WorkerStats& w) { return w.num_blocks; });
  registry->AddGaugeFamily(
      "pagoda_worker_kv_tokens",
      "Tokens a worker's KV pool holds (blocks x block size), labelled with its K/V type.",
      [cluster] {
        Values out;
        for (const WorkerStats& w : cluster->worker_stats()) {
          out.push_back({{{"worker", std::to_string(w.id)},
                          {"kv_dtype", w.kv_cache_dtype.empty() ? "unknown" : w.kv_cache_dtype}},
                         static_cast<double>(w.num_blocks * w.block_size)});
        }
        return out;
      });
  worker_gauge("pagoda_worker_prefix_cache_queries_total",
               "Prompt tokens a worker's prefix cache was asked for (since it joined).",
               [](const WorkerStats& w) { return w.load.num_prefix_query_tokens; });
  worker_gauge("pagoda_worker_prefix_cache_hits_total",
               "Of those, the tokens it found cached (since it joined).",
               [](const WorkerStats& w) { return w.load.num_prefix_hit_tokens; });
  worker_gauge("pagoda_worker_kv_transfer_blocks_in_total",
               "KV blocks a worker received from its peers by transfer (since it joined).",
               [](const WorkerStats& w) { return w.load.num_transfer_blocks_in; });
}

}  // namespace pagoda
