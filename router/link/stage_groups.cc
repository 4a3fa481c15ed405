#include "router/link/stage_groups.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/layer_range.h"
#include "glog/logging.h"
#include "router/core/stage_group.h"
#include "router/core/stage_slice.h"
#include "router/core/worker_limits.h"

namespace pagoda {

StageGroups::StageGroups(const std::vector<Cluster*>& clusters, int max_waiting)
    : max_waiting_(max_waiting) {
  for (Cluster* c : clusters) {
    auto assembler = std::make_shared<StageAssembler>(c->config().num_layers);
    assemblers_[c] = assembler;
    if (c->metrics() == nullptr) continue;
    MetricsRegistry* registry = c->metrics()->registry;
    registry->AddGaugeFamily("pagoda_stages_waiting",
                             "Pipeline stages waiting for the rest of their group.", [assembler] {
                               return std::vector<std::pair<MetricLabels, double>>{
                                   {{}, static_cast<double>(assembler->num_waiting())}};
                             });
    registry->AddGaugeFamily(
        "pagoda_stage_missing_layers",
        "Layers of the model that no waiting pipeline stage holds (0 while none waits): a "
        "group forms when its stages tile every layer.",
        [assembler] {
          return std::vector<std::pair<MetricLabels, double>>{
              {{}, static_cast<double>(assembler->NumMissing())}};
        });
  }
}

bool StageGroups::IsStage(const WorkerInfo& info, const Cluster& cluster) {
  // A worker of another model is refused as such, whatever its layers (its model's count is
  // not the router's).
  return info.model_fingerprint == cluster.config().Fingerprint() && info.layer_end != 0 &&
         !(info.layer_begin == 0 && info.layer_end == cluster.config().num_layers);
}

absl::Status StageGroups::Check(const WorkerInfo& info, Cluster* cluster_ptr) const {
  const Cluster& cluster = *cluster_ptr;
  // What the group takes from it is checked again as the group's, once it forms.
  if (absl::Status s = ValidateWorkerInfo(info, WorkerLimits()); !s.ok()) return s;
  const int layers = cluster.config().num_layers;
  if (absl::Status s = CheckLayerRange({info.layer_begin, info.layer_end}, layers); !s.ok()) {
    return s;
  }
  if (info.layer_begin > 0 && info.kv_transfer_address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pipeline stage of layers ", info.layer_begin, ":", info.layer_end,
                     " needs --kv-transfer-port: the stage before sends it activations there"));
  }
  if (assemblers_.at(cluster_ptr)->num_waiting() >= max_waiting_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(max_waiting_, " pipeline stages already wait for their groups"));
  }
  return absl::OkStatus();
}

void StageGroups::Join(Cluster* cluster, Stage stage) {
  StageAssembler& assembler = *assemblers_.at(cluster);
  const WorkerInfo& info = stage.connection->info();
  std::vector<Stage> stages;
  {
    absl::MutexLock lock(&mu_);
    const Executor* key = stage.connection.get();
    const std::string name = stage.name;
    waiting_[key] = std::move(stage);
    std::vector<std::shared_ptr<Executor>> formed = assembler.Join(waiting_[key].connection);
    if (formed.empty()) {
      LOG(INFO) << "pipeline stage " << name << " (layers " << info.layer_begin << ":"
                << info.layer_end << ") waits for the stages of layers " << assembler.Missing();
      return;
    }
    for (const std::shared_ptr<Executor>& e : formed) {
      auto it = waiting_.find(e.get());
      stages.push_back(std::move(it->second));
      waiting_.erase(it);
    }
  }
  std::vector<std::shared_ptr<Executor>> executors;
  std::string names;
  for (const Stage& s : stages) {
    executors.push_back(s.connection);
    absl::StrAppend(&names, names.empty() ? "" : ", ", s.name, " (",
                    s.connection->info().layer_begin, ":", s.connection->info().layer_end, ")");
  }
  absl::StatusOr<std::unique_ptr<StageGroup>> group =
      StageGroup::Create(executors, cluster->config().num_layers, cluster->metrics());
  // The group joins as its slices (StageSlice), each a worker of the Cluster.
  std::vector<int> ids;
  absl::Status added = group.status();
  if (group.ok()) {
    // Each stage learns where its activations go before the group's first step.
    for (size_t i = 0; i < stages.size(); ++i) {
      stages[i].wire(i + 1 < stages.size() ? stages[i + 1].connection->info().kv_transfer_address
                                           : std::string());
    }
    for (std::shared_ptr<StageSlice>& slice : StageSlice::Split(
             std::shared_ptr<StageGroup>(*std::move(group)), cluster->max_model_len())) {
      absl::StatusOr<int> id = cluster->AddWorker(std::move(slice));
      if (!id.ok()) {
        added = id.status();
        break;
      }
      ids.push_back(*id);
    }
  }
  if (!added.ok()) {
    LOG(WARNING) << "pipeline stages " << names << " cannot serve as one group: " << added.message()
                 << "; each joins again";
    for (int id : ids) cluster->RemoveWorker(id);
    for (const Stage& s : stages) s.connection->Abandon();
    return;
  }
  LOG(INFO) << "pipeline stages " << names << " serve as worker" << (ids.size() > 1 ? "s " : " ")
            << absl::StrJoin(ids, ", ") << " (" << ids.size()
            << (ids.size() > 1 ? " micro-batch slices" : " slice") << ")";
  auto g = std::make_shared<Group>();
  g->worker_ids = std::move(ids);
  g->stages = std::move(stages);
  absl::MutexLock lock(&mu_);
  for (const Stage& s : g->stages) groups_[s.connection.get()] = g;
}

void StageGroups::Leave(Cluster* cluster, const Executor* stage) {
  std::shared_ptr<Group> g;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(stage);
    if (it == groups_.end()) {
      waiting_.erase(stage);
      assemblers_.at(cluster)->Leave(stage);
      return;
    }
    g = it->second;
    for (const Stage& s : g->stages) groups_.erase(s.connection.get());
    if (g->left) return;
    g->left = true;
  }
  LOG(WARNING) << "a pipeline stage of worker" << (g->worker_ids.size() > 1 ? "s " : " ")
               << absl::StrJoin(g->worker_ids, ", ")
               << " is gone: the group leaves, its other stages join again";
  for (int id : g->worker_ids) cluster->RemoveWorker(id);
  for (const Stage& s : g->stages) s.connection->Abandon();
}

void StageGroups::Drain(Cluster* cluster, const Executor* stage) {
  std::shared_ptr<Group> g;
  std::function<void()> drained;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(stage);
    if (it == groups_.end()) {
      auto waiting = waiting_.find(stage);
      if (waiting != waiting_.end()) drained = waiting->second.drained;
    } else if (!it->second->draining) {
      g = it->second;
      g->draining = true;
    }
  }
  if (drained) drained();
  if (g == nullptr) return;
  // Drained once every slice is.
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(g->worker_ids.size()));
  for (int id : g->worker_ids) {
    cluster->DrainWorker(id, [g, left] {
      if (left->fetch_sub(1) != 1) return;
      for (const Stage& s : g->stages) s.drained();
    });
  }
}

}  // namespace pagoda
