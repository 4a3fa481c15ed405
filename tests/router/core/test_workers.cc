#include "tests/router/core/test_workers.h"

#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"

namespace pagoda::testing {

ModelConfig Stories260KConfig() {
  auto w = LoadLlama2cCheckpoint(Stories260KModel());
  CHECK(w.ok()) << w.status();
  return w->config;
}

std::shared_ptr<Executor> NewWorker(int num_blocks) {
  auto w = LoadLlama2cCheckpoint(Stories260KModel());
  CHECK(w.ok()) << w.status();
  WorkerOptions wo;
  wo.num_blocks = num_blocks;
  wo.max_num_batched_tokens = 512;
  auto engine = WorkerEngine::Create(*std::move(w), wo);
  CHECK(engine.ok()) << engine.status();
  return std::make_shared<InProcessExecutor>(*std::move(engine));
}

absl::StatusOr<StepResult> GatedExecutor::Execute(const StepCommand& command) {
  {
    absl::MutexLock lock(&mu_);
    const int me = ++entered_;
    auto open = [this, me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return allowed_ >= me; };
    mu_.Await(absl::Condition(&open));
  }
  return real_->Execute(command);
}

void GatedExecutor::Allow(int steps) {
  absl::MutexLock lock(&mu_);
  allowed_ += steps;
}

void GatedExecutor::WaitEntered(int n) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
  mu_.Await(absl::Condition(&reached));
}

}  // namespace pagoda::testing
