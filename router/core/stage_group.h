// A pipeline stage group (issue 40): the workers whose layer ranges tile one model, served as
// one logical worker. Each stage is an Executor (a worker's connection); Execute sends the step
// to every stage at once, each from its own thread, because a stage past the first waits for
// the stage before's activations, which flow worker to worker (StageLink), never through the
// router. It answers with the last stage's result (the only one that samples) once every stage
// has answered. A stage's error is the group's, and abandons the other stages so that none
// waits for a stage that is gone. What the group offers (info()) is what all its stages can do:
// the fewest blocks (the stages share block ids), the smallest step, the adapters all hold.
// Several steps may run at once (StageSlice: each over its own sequences and blocks), so that one
// stage computes a step while the next computes the step before: each stage takes its calls in
// the order the steps (and adapter changes) came, so a stage never waits for activations that a
// later step of the stage before holds up.
#ifndef PAGODA_ROUTER_CORE_STAGE_GROUP_H_
#define PAGODA_ROUTER_CORE_STAGE_GROUP_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/executor.h"
#include "router/core/router_metrics.h"

namespace pagoda {

class StageGroup final : public Executor {
 public:
  // `stages` in layer order. INVALID_ARGUMENT, naming the
  // stage, unless their ranges tile [0, num_layers) and they agree on the model fingerprint,
  // block size and K/V dtype. `metrics` (not owned; may be null) gets each stage's timing of
  // every step (RouterMetrics::Stage).
  static absl::StatusOr<std::unique_ptr<StageGroup>> Create(
      std::vector<std::shared_ptr<Executor>> stages, int num_layers,
      RouterMetrics* metrics = nullptr);

  // Its adapters change in ChangeAdapter: read it on the thread that calls that, or through a
  // StageSlice (which keeps its own).
  const WorkerInfo& info() const override { return info_; }
  // Thread-safe: concurrent steps reach each stage in the order they came here.
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override;
  // Every stage loads (or unloads) it, in order; the first error is the group's. Thread-safe,
  // and idempotent (each slice of the group asks): loading an adapter the group holds answers
  // with it, unloading one it does not hold answers at once.
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override;
  // Abandons every stage. Thread-safe as the stages' Abandon is (a step's failing stage calls
  // it from that stage's thread).
  void Abandon() override;

  int num_stages() const { return static_cast<int>(stages_.size()); }

 private:
  StageGroup(std::vector<std::shared_ptr<Executor>> stages, WorkerInfo info, RouterMetrics* metrics)
      : stages_(std::move(stages)),
        series_(SeriesOf(metrics, stages_.size())),
        info_(std::move(info)),
        turn_(stages_.size(), 0) {}
  // Stage i's timing of a step, where its values are sane (a worker's result is untrusted).
  void Record(size_t i, const StepResult& result);

  // Takes the next place in every stage's order.
  int64_t TakeTicket() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `call` on stage `i` in ticket `ticket`'s turn, then passes the turn on.
  template <class Call>
  auto InTurn(size_t i, int64_t ticket, Call call) ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<std::shared_ptr<Executor>> stages_;
  // Each stage's metric series, looked up once (RouterMetrics::Stage takes a lock); empty
  // without metrics.
  static std::vector<const RouterMetrics::StageSeries*> SeriesOf(RouterMetrics* metrics,
                                                                 size_t num_stages);
  const std::vector<const RouterMetrics::StageSeries*> series_;
  absl::Mutex adapters_mu_;  // held through a whole ChangeAdapter
  WorkerInfo info_;          // its adapters change only under adapters_mu_
  absl::Mutex mu_;
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> turn_ ABSL_GUARDED_BY(mu_);  // the ticket each stage serves next
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STAGE_GROUP_H_
