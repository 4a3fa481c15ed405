#include "router/api/served_models.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

bool HasReadyWorker(const Cluster& cluster) {
  const ClusterStats stats = cluster.stats();
  return stats.num_workers > stats.num_draining_workers;
}

}  // namespace

absl::Status ServedModels::Add(ServedModel model) {
  if (model.cluster == nullptr || model.tokenizer == nullptr) {
    return absl::InvalidArgumentError("a served model needs its cluster and tokenizer");
  }
  if (model.name.empty()) return absl::InvalidArgumentError("--model: a model needs a name");
  for (const auto& m : models_) {
    if (m->name == model.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model: two models are named `", model.name, "`; name them NAME=PATH"));
    }
  }
  model.constraints =
      std::make_shared<ConstraintCompiler>(model.tokenizer, model.cluster->config());
  models_.push_back(std::make_unique<ServedModel>(std::move(model)));
  return absl::OkStatus();
}

absl::StatusOr<const ServedModel*> ServedModels::Find(absl::string_view name) const {
  ASSIGN_OR_RETURN(const Choice choice, Resolve(name));
  return choice.model;
}

absl::StatusOr<ServedModels::Choice> ServedModels::Resolve(absl::string_view name) const {
  if (models_.empty()) return absl::UnavailableError("no model is served");
  if (name.empty()) return Choice{.model = models_.front().get()};
  for (const auto& m : models_) {
    if (m->name == name) return Choice{.model = m.get()};
  }
  for (const auto& m : models_) {
    if (m->cluster->loras().Known(std::string_view(name.data(), name.size()))) {
      return Choice{.model = m.get(), .adapter = std::string(name)};
    }
  }
  return absl::NotFoundError(
      absl::StrCat("the model `", name, "` does not exist; this router serves ", Names()));
}

absl::Status ServedModels::CheckServing(const Choice& choice) const {
  const ServedModel& model = *choice.model;
  if (!choice.adapter.empty() && model.cluster->loras().NumHolding(choice.adapter) == 0 &&
      HasReadyWorker(*model.cluster)) {
    return absl::UnavailableError(absl::StrCat("no worker of `", model.name,
                                               "` holds the LoRA adapter `", choice.adapter,
                                               "` (its workers failed to load it?)"));
  }
  return CheckServing(model);
}

absl::Status ServedModels::CheckServing(const ServedModel& model) const {
  if (models_.size() < 2 || HasReadyWorker(*model.cluster)) return absl::OkStatus();
  for (const auto& m : models_) {
    if (m.get() != &model && HasReadyWorker(*m->cluster)) {
      return absl::UnavailableError(
          absl::StrCat("the model `", model.name, "` has no worker ready (other models have)"));
    }
  }
  return absl::OkStatus();
}

std::string ServedModels::Names() const {
  std::vector<std::string> names;
  for (const auto& m : models_) {
    names.push_back(m->name);
    for (std::string& adapter : m->cluster->loras().Names()) names.push_back(std::move(adapter));
  }
  return absl::StrJoin(names, ", ", [](std::string* out, const std::string& name) {
    absl::StrAppend(out, "`", name, "`");
  });
}

}  // namespace pagoda
