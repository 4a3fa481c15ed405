// Runs steps on a WorkerEngine in the caller's process: the offline mode and most tests.
#ifndef PAGODA_WORKER_IN_PROCESS_EXECUTOR_H_
#define PAGODA_WORKER_IN_PROCESS_EXECUTOR_H_

#include <memory>

#include "common/executor.h"
#include "common/status_macros.h"
#include "worker/worker_engine.h"

namespace pagoda {

class InProcessExecutor final : public Executor {
 public:
  explicit InProcessExecutor(std::unique_ptr<WorkerEngine> engine) : engine_(std::move(engine)) {}

  const WorkerInfo& info() const override { return engine_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    return engine_->Execute(command);
  }
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override {
    if (change.path.empty()) {
      RETURN_IF_ERROR(engine_->UnloadAdapter(change.name));
      AdapterInfo unloaded;
      unloaded.name = change.name;
      return unloaded;
    }
    RETURN_IF_ERROR(engine_->LoadAdapter(change.name, change.path));
    for (const AdapterInfo& a : engine_->info().adapters) {
      if (a.name == change.name) return a;
    }
    return absl::InternalError("the adapter loaded is not listed");
  }
  const WorkerEngine& engine() const { return *engine_; }

 private:
  std::unique_ptr<WorkerEngine> engine_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_IN_PROCESS_EXECUTOR_H_
