// The router's side of pipeline stages (issue 40): workers whose Hello holds a range of their
// model's layers. Each waits (StageAssembler, one per model) until stages of its model tile
// every layer; the stages then form one StageGroup: each is told where to send its activations
// (the next stage's transfer address), and the group joins the model's Cluster as its
// micro-batch slices (StageSlice), each a worker of the Cluster.
// A stage whose stream ends takes its group out of the Cluster (its sequences move, as a dead
// worker's) and ends its fellow stages' calls, so that all of them join afresh: a group lives
// and dies whole. A stage that asks to drain drains its group. Thread-safe: every stage's
// call calls it, on gRPC's threads.
#ifndef PAGODA_ROUTER_LINK_STAGE_GROUPS_H_
#define PAGODA_ROUTER_LINK_STAGE_GROUPS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "router/core/cluster.h"
#include "router/core/stage_assembler.h"

namespace pagoda {

class StageGroups {
 public:
  // A stage's connection, and what its transport does for the group.
  struct Stage {
    std::shared_ptr<Executor> connection;
    std::string name;                                         // for logs
    std::function<void(const std::string& next_stage)> wire;  // sends its StageWiring
    std::function<void()> drained;                            // sends its Drained
  };

  // One StageAssembler per Cluster (not owned; they outlive this). A Cluster with metrics gets
  // the gauges pagoda_stages_waiting and pagoda_stage_missing_layers (the layers its waiting
  // stages lack), and its groups' per-stage series (RouterMetrics::Stage).
  explicit StageGroups(const std::vector<Cluster*>& clusters, int max_waiting = 256);

  // Whether a Hello's range makes a worker of `cluster`'s model a stage (not every layer). A
  // worker of another model is not one: the Cluster refuses it as any worker of another model.
  static bool IsStage(const WorkerInfo& info, const Cluster& cluster);
  // INVALID_ARGUMENT naming the problem for a stage `cluster` cannot take: a Hello out of range
  // (ValidateWorkerInfo), layers outside the model, no transfer address for the stage before to
  // send to; RESOURCE_EXHAUSTED while max_waiting stages wait.
  absl::Status Check(const WorkerInfo& info, Cluster* cluster) const;
  // A stage that passed Check (and was answered) waits; when it completes a group, the group is
  // wired and added to the Cluster, or, if its stages disagree or the Cluster refuses it, every
  // stage of it is abandoned (each joins again). The log says which layers are still missing.
  void Join(Cluster* cluster, Stage stage) ABSL_LOCKS_EXCLUDED(mu_);
  // The stage's stream ended. Its group, if it has one, leaves the Cluster and its other stages
  // are abandoned; else it stops waiting.
  void Leave(Cluster* cluster, const Executor* stage) ABSL_LOCKS_EXCLUDED(mu_);
  // The stage asks to drain: its group drains, and every stage of it is sent Drained once the
  // group holds nothing; a stage waiting for a group is sent Drained at once.
  void Drain(Cluster* cluster, const Executor* stage) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Group {
    std::vector<int> worker_ids;  // the Cluster's, one per slice
    std::vector<Stage> stages;
    bool left = false;      // taken out of the Cluster
    bool draining = false;  // DrainWorker asked
  };

  const int max_waiting_;  // per model
  absl::Mutex mu_;
  // Constant; shared with the gauges, which a registry may read after this is gone.
  absl::flat_hash_map<Cluster*, std::shared_ptr<StageAssembler>> assemblers_;
  // Stages waiting, by connection, with what their transport does (the assembler holds only
  // the executors).
  absl::flat_hash_map<const Executor*, Stage> waiting_ ABSL_GUARDED_BY(mu_);
  // Each stage of a formed group, by connection.
  absl::flat_hash_map<const Executor*, std::shared_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_STAGE_GROUPS_H_
