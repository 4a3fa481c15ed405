// The LoRA adapters of one model's workers, as the router places requests on them and lists
// them (issue 39): which worker holds which adapter (its Hello, then the answers to the
// LoadAdapter and UnloadAdapter the router sent it since), and the adapters configured at start
// (--lora-modules, for the workers the router spawns), listed before a worker holds them. One
// name is one set of weights: a worker holding a known name under another digest is refused, or
// its sequences would sample from other weights than its peers'. The Cluster calls it where a
// worker joins, leaves and answers, and where a request is placed; the front ends ask it whether
// a name is an adapter; the router's /v1/load_lora_adapter loads one on every worker through
// it. Thread-safe.
//
//   LoraCatalog catalog;
//   RETURN_IF_ERROR(catalog.AddWorker(id, info.adapters));
//   if (catalog.Holds(id, request.adapter)) ...  // a candidate for the request
#ifndef PAGODA_ROUTER_CORE_LORA_CATALOG_H_
#define PAGODA_ROUTER_CORE_LORA_CATALOG_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/executor.h"
#include "router/core/worker_loop.h"

namespace pagoda {

class LoraCatalog {
 public:
  // Names listed (and requests for them accepted and left waiting) before a worker holds them.
  void Configure(const std::vector<std::string>& names);

  // A worker joins holding `adapters` (its Hello's, already bounded by ValidateWorkerInfo).
  // INVALID_ARGUMENT naming the adapter when another worker holds that name with another
  // digest (nothing is recorded then).
  absl::Status AddWorker(int worker, const std::vector<AdapterInfo>& adapters);
  void RemoveWorker(int worker);
  // The worker's answer to a LoadAdapter that succeeded / an UnloadAdapter. Loaded refuses as
  // AddWorker does.
  absl::Status Loaded(int worker, const AdapterInfo& adapter);
  void Unloaded(int worker, const std::string& name);
  // The name is no longer served: neither configured nor held (an unload finished everywhere).
  void Forget(const std::string& name);

  // Loads (change.path set) or unloads an adapter on each of `workers` (id and loop, at its
  // next wake), records each answer, and calls `done` once every one answered: OK, or the
  // first error, naming its worker. A load is remembered, so that workers joining later load
  // it too (CatchUp); an unload forgets the name once every worker answered.
  using Worker = std::pair<int, WorkerLoop*>;
  void Change(const AdapterChange& change, const std::vector<Worker>& workers,
              std::function<void(absl::Status)> done);
  // Loads on a worker that just joined the adapters loaded at run time that it lacks.
  void CatchUp(int worker, WorkerLoop* loop, const std::vector<AdapterInfo>& held);

  // Whether `worker` holds `adapter` ("" is the base model, which every worker holds).
  bool Holds(int worker, std::string_view adapter) const;
  // Configured, or held by a worker.
  bool Known(std::string_view adapter) const;
  // How many workers hold it.
  int NumHolding(std::string_view adapter) const;
  // Every known name, sorted.
  std::vector<std::string> Names() const;

 private:
  absl::Status CheckDigestLocked(int worker, const AdapterInfo& adapter) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Records a worker's answer to `change`.
  absl::Status Answered(int worker, const AdapterChange& change,
                        const absl::StatusOr<AdapterInfo>& answer);

  mutable absl::Mutex mu_;
  std::set<std::string, std::less<>> configured_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> loaded_at_run_time_ ABSL_GUARDED_BY(mu_);  // name -> path
  // worker -> (name -> its adapter there)
  std::map<int, std::map<std::string, AdapterInfo, std::less<>>> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_LORA_CATALOG_H_
