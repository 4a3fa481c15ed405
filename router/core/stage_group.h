// A pipeline stage group (issue 40): the workers whose layer ranges tile one model, served as
// one logical worker. Each stage is an Executor (a worker's connection); Execute sends the step
// to every stage at once, each from its own thread, because a stage past the first waits for
// the stage before's activations, which flow worker to worker (StageLink), never through the
// router. It answers with the last stage's result (the only one that samples) once every stage
// has answered. A stage's error is the group's, and abandons the other stages so that none
// waits for a stage that is gone. What the group offers (info()) is what all its stages can do:
// the fewest blocks (the stages share block ids), the smallest step, the adapters all hold.
#ifndef PAGODA_ROUTER_CORE_STAGE_GROUP_H_
#define PAGODA_ROUTER_CORE_STAGE_GROUP_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/executor.h"

namespace pagoda {

class StageGroup final : public Executor {
 public:
  // `stages` in layer order. INVALID_ARGUMENT, naming the
  // stage, unless their ranges tile [0, num_layers) and they agree on the model fingerprint,
  // block size and K/V dtype.
  static absl::StatusOr<std::unique_ptr<StageGroup>> Create(
      std::vector<std::shared_ptr<Executor>> stages, int num_layers);

  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override;
  // Every stage loads (or unloads) it, in order; the first error is the group's.
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override;
  // Abandons every stage. Thread-safe as the stages' Abandon is (a step's failing stage calls
  // it from that stage's thread).
  void Abandon() override;

  int num_stages() const { return static_cast<int>(stages_.size()); }

 private:
  StageGroup(std::vector<std::shared_ptr<Executor>> stages, WorkerInfo info)
      : stages_(std::move(stages)), info_(std::move(info)) {}

  const std::vector<std::shared_ptr<Executor>> stages_;
  WorkerInfo info_;  // changes only in ChangeAdapter, on the caller's thread
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STAGE_GROUP_H_
