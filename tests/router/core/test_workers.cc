#include "tests/router/core/test_workers.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "tests/common/model/lora_files.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"

namespace pagoda::testing {

ModelConfig Stories260KConfig() {
  auto w = LoadLlama2cCheckpoint(Stories260KModel());
  CHECK(w.ok()) << w.status();
  return w->config;
}

namespace {

std::shared_ptr<Executor> Worker(const WorkerOptions& wo) {
  auto w = LoadLlama2cCheckpoint(Stories260KModel());
  CHECK(w.ok()) << w.status();
  auto engine = WorkerEngine::Create(*std::move(w), wo);
  CHECK(engine.ok()) << engine.status();
  return std::make_shared<InProcessExecutor>(*std::move(engine));
}

}  // namespace

std::shared_ptr<Executor> NewWorker(int num_blocks) {
  WorkerOptions wo;
  wo.num_blocks = num_blocks;
  wo.max_num_batched_tokens = 512;
  return Worker(wo);
}

std::shared_ptr<Executor> NewWorkerWithAdapters(const std::vector<std::string>& adapters,
                                                int max_loras, int num_blocks) {
  WorkerOptions wo;
  wo.num_blocks = num_blocks;
  wo.max_num_batched_tokens = 512;
  wo.max_loras = max_loras;
  wo.max_cpu_loras = std::max<int>(max_loras, static_cast<int>(adapters.size()));
  wo.lora_dirs = {TempDir()};
  for (const std::string& name : adapters) wo.lora_modules.push_back({name, AdapterPath(name)});
  return Worker(wo);
}

std::string AdapterPath(const std::string& name) {
  const std::string dir = TempDir() + "/lora-" + name;
  if (!std::filesystem::exists(dir)) {
    const ModelConfig config = Stories260KConfig();
    const uint64_t seed = std::hash<std::string>()(name);
    WritePeftLora(RandomLoraAdapter(config, /*rank=*/4, /*alpha=*/8, seed, /*strength=*/3.0),
                  config, /*alpha=*/8, dir);
  }
  return dir;
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
