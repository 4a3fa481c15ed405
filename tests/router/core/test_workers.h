// Workers for the router's tests: a real in-process stories260K worker, and executors around
// one that hold its steps at a gate or fail them.
#ifndef PAGODA_TESTS_ROUTER_CORE_TEST_WORKERS_H_
#define PAGODA_TESTS_ROUTER_CORE_TEST_WORKERS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/executor.h"
#include "common/model/model_config.h"

namespace pagoda::testing {

// stories260K's configuration, which the router side is built with.
ModelConfig Stories260KConfig();
// A stories260K worker in this process.
std::shared_ptr<Executor> NewWorker(int num_blocks = 256);
// The same, holding a random rank-4 LoRA adapter (written under TempDir()) for each name; one
// name is one adapter (its seed is the name's hash), on every worker that holds it. `max_loras`:
// the worker's --max-loras.
// Its --lora-dir is TempDir(), where AdapterPath writes.
std::shared_ptr<Executor> NewWorkerWithAdapters(const std::vector<std::string>& adapters,
                                                int max_loras = 4, int num_blocks = 256);
// The PEFT directory of the adapter named `name` (written under TempDir() on first use).
std::string AdapterPath(const std::string& name);

// Runs a real worker's steps, each only once the test allows it. Thread-safe.
class GatedExecutor final : public Executor {
 public:
  explicit GatedExecutor(std::shared_ptr<Executor> real) : real_(std::move(real)) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override;
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override {
    return real_->ChangeAdapter(change);
  }
  void Allow(int steps);
  // Blocks until `n` steps have reached the gate.
  void WaitEntered(int n);

 private:
  std::shared_ptr<Executor> real_;
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int allowed_ ABSL_GUARDED_BY(mu_) = 0;
};

// A worker whose every step fails, as one whose stream broke.
class FailingExecutor final : public Executor {
 public:
  explicit FailingExecutor(std::shared_ptr<Executor> real) : real_(std::move(real)) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand&) override {
    return absl::UnavailableError("the worker's stream broke");
  }

 private:
  std::shared_ptr<Executor> real_;
};

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_ROUTER_CORE_TEST_WORKERS_H_
