#include "router/core/lora_catalog.h"

#include <algorithm>
#include <memory>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {

void LoraCatalog::Configure(const std::vector<std::string>& names) {
  absl::MutexLock lock(&mu_);
  configured_.insert(names.begin(), names.end());
}

absl::Status LoraCatalog::CheckDigestLocked(int worker, const AdapterInfo& adapter) const {
  for (const auto& [other, adapters] : held_) {
    if (other == worker) continue;
    const auto it = adapters.find(adapter.name);
    if (it != adapters.end() && it->second.digest != adapter.digest) {
      return absl::InvalidArgumentError(
          absl::StrCat("the LoRA adapter `", adapter.name, "` differs from the one worker ", other,
                       " holds under that name (digest ", adapter.digest, " against ",
                       it->second.digest, "): one name must be one set of weights"));
    }
  }
  return absl::OkStatus();
}

absl::Status LoraCatalog::AddWorker(int worker, const std::vector<AdapterInfo>& adapters) {
  absl::MutexLock lock(&mu_);
  for (const AdapterInfo& a : adapters) {
    if (absl::Status s = CheckDigestLocked(worker, a); !s.ok()) return s;
  }
  auto& held = held_[worker];
  held.clear();
  for (const AdapterInfo& a : adapters) held[a.name] = a;
  return absl::OkStatus();
}

void LoraCatalog::RemoveWorker(int worker) {
  absl::MutexLock lock(&mu_);
  held_.erase(worker);
}

absl::Status LoraCatalog::Loaded(int worker, const AdapterInfo& adapter) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckDigestLocked(worker, adapter); !s.ok()) return s;
  held_[worker][adapter.name] = adapter;
  return absl::OkStatus();
}

void LoraCatalog::Unloaded(int worker, const std::string& name) {
  absl::MutexLock lock(&mu_);
  const auto it = held_.find(worker);
  if (it != held_.end()) it->second.erase(name);
}

void LoraCatalog::Forget(const std::string& name) {
  absl::MutexLock lock(&mu_);
  configured_.erase(name);
  loaded_at_run_time_.erase(name);
  for (auto& [worker, adapters] : held_) adapters.erase(name);
}

absl::Status LoraCatalog::Answered(int worker, const AdapterChange& change,
                                   const absl::StatusOr<AdapterInfo>& answer) {
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        absl::StrCat("worker ", worker, ": ", answer.status().message()));
  }
  if (change.path.empty()) {
    Unloaded(worker, change.name);
    return absl::OkStatus();
  }
  if (answer->name != change.name) {
    return absl::InternalError(absl::StrCat("worker ", worker, " loaded `", answer->name,
                                            "` when asked for `", change.name, "`"));
  }
  return Loaded(worker, *answer);
}

void LoraCatalog::Change(const AdapterChange& change, const std::vector<Worker>& workers,
                         std::function<void(absl::Status)> done) {
  if (workers.empty()) {
    done(absl::UnavailableError("no worker is connected"));
    return;
  }
  struct Pending {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu);
    absl::Status first_error ABSL_GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  {
    absl::MutexLock lock(&pending->mu);
    pending->left = static_cast<int>(workers.size());
  }
  if (!change.path.empty()) {
    absl::MutexLock lock(&mu_);
    loaded_at_run_time_[change.name] = change.path;
  }
  for (const Worker& worker : workers) {
    const int id = worker.first;
    worker.second->ChangeAdapter(
        change, [this, id, change, pending, done](const absl::StatusOr<AdapterInfo>& answer) {
          const absl::Status status = Answered(id, change, answer);
          absl::Status result;
          {
            absl::MutexLock lock(&pending->mu);
            if (!status.ok() && pending->first_error.ok()) pending->first_error = status;
            if (--pending->left > 0) return;
            result = pending->first_error;
          }
          // Unloaded everywhere, or loaded nowhere: the name is no longer served.
          if (change.path.empty() || (!result.ok() && NumHolding(change.name) == 0)) {
            Forget(change.name);
          }
          done(result);
        });
  }
}

void LoraCatalog::CatchUp(int worker, WorkerLoop* loop, const std::vector<AdapterInfo>& held) {
  std::vector<AdapterChange> missing;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, path] : loaded_at_run_time_) {
      const bool has =
          absl::c_any_of(held, [&name = name](const AdapterInfo& a) { return a.name == name; });
      if (!has) missing.push_back({.name = name, .path = path});
    }
  }
  for (AdapterChange& change : missing) {
    loop->ChangeAdapter(change, [this, worker, change](const absl::StatusOr<AdapterInfo>& answer) {
      if (absl::Status s = Answered(worker, change, answer); !s.ok()) {
        LOG(WARNING) << "loading LoRA adapter " << change.name << " on a new worker: " << s;
      }
    });
  }
}

bool LoraCatalog::Holds(int worker, std::string_view adapter) const {
  if (adapter.empty()) return true;
  absl::MutexLock lock(&mu_);
  const auto it = held_.find(worker);
  return it != held_.end() && it->second.contains(adapter);
}

bool LoraCatalog::Known(std::string_view adapter) const {
  if (adapter.empty()) return false;
  absl::MutexLock lock(&mu_);
  if (configured_.contains(adapter)) return true;
  for (const auto& [worker, adapters] : held_) {
    if (adapters.contains(adapter)) return true;
  }
  return false;
}

int LoraCatalog::NumHolding(std::string_view adapter) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [worker, adapters] : held_) n += adapters.contains(adapter);
  return n;
}

std::vector<std::string> LoraCatalog::Names() const {
  absl::MutexLock lock(&mu_);
  std::set<std::string> names(configured_.begin(), configured_.end());
  for (const auto& [worker, adapters] : held_) {
    for (const auto& [name, info] : adapters) names.insert(name);
  }
  return {names.begin(), names.end()};
}

}  // namespace pagoda
