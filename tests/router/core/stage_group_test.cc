// StageGroup (issue 40): the stages of a pipeline served as one Executor. Scripted stages check
// what it offers (the least of its stages), whom it refuses (stages that do not tile the model,
// or disagree on the model), and how it runs a step: on every stage at once, the last stage's
// result as the group's, a stage's error as the group's with the other stages abandoned.
#include "router/core/stage_group.h"

#include <atomic>
#include <limits>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// A stage whose steps answer with `error` (OK: a result naming the stage), optionally only once
// every stage has entered its step (all run at once) or once abandoned.
class ScriptedStage final : public Executor {
 public:
  ScriptedStage(int begin, int end, int num_blocks) {
    info_.model_fingerprint = "m";
    info_.block_size = 16;
    info_.kv_cache_dtype = "f32";
    info_.num_blocks = num_blocks;
    info_.max_num_batched_tokens = 512 - begin;
    info_.max_num_seqs = 64;
    info_.max_loras = 4;
    info_.max_cpu_loras = 8;
    info_.layer_begin = begin;
    info_.layer_end = end;
    info_.adapters = {{"a", 8, "d1"}, {"b", 8, "d2"}};
  }
  WorkerInfo& mutable_info() { return info_; }
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    entered->fetch_add(1);
    if (wait_for_all) {
      while (entered->load() < num_stages && !abandoned.load()) std::this_thread::yield();
    }
    if (wait_for_abandon) {
      while (!abandoned.load()) std::this_thread::yield();
      return absl::UnavailableError("abandoned");
    }
    if (!error.ok()) return error;
    StepResult r;
    r.step_id = command.step_id;
    r.forward_seconds = forward_seconds;
    r.stage = timing;
    SampledToken& t = r.sampled.emplace_back();
    t.seq_id = info_.layer_begin;
    t.token_id = info_.layer_end;
    return r;
  }
  void Abandon() override { abandoned = true; }

  std::atomic<int>* entered = nullptr;
  int num_stages = 0;
  bool wait_for_all = false;
  bool wait_for_abandon = false;
  absl::Status error;
  std::atomic<bool> abandoned{false};
  double forward_seconds = 0;
  StageTiming timing;

 private:
  WorkerInfo info_;
};

struct Stages {
  std::atomic<int> entered{0};
  std::vector<std::shared_ptr<ScriptedStage>> stages;
  Stages(std::initializer_list<std::pair<int, int>> ranges) {
    for (auto [begin, end] : ranges) {
      stages.push_back(std::make_shared<ScriptedStage>(begin, end, 100 + begin));
      stages.back()->entered = &entered;
      stages.back()->num_stages = static_cast<int>(ranges.size());
    }
  }
  std::vector<std::shared_ptr<Executor>> executors() const {
    return {stages.begin(), stages.end()};
  }
};

TEST(StageGroupTest, OffersWhatEveryStageCan) {
  Stages s({{0, 3}, {3, 8}});
  s.stages[1]->mutable_info().adapters.pop_back();  // only "a" is on both
  s.stages[1]->mutable_info().max_loras = 2;
  absl::StatusOr<std::unique_ptr<StageGroup>> group = StageGroup::Create(s.executors(), 8);
  ASSERT_TRUE(group.ok()) << group.status();
  const WorkerInfo& info = (*group)->info();
  EXPECT_EQ(info.layer_begin, 0);
  EXPECT_EQ(info.layer_end, 8);
  EXPECT_EQ(info.num_blocks, 100) << "the stages share block ids: the fewest";
  EXPECT_EQ(info.max_num_batched_tokens, 509);
  EXPECT_EQ(info.max_loras, 2);
  ASSERT_EQ(info.adapters.size(), 1u);
  EXPECT_EQ(info.adapters[0].name, "a");
  EXPECT_EQ((*group)->num_stages(), 2);
}

TEST(StageGroupTest, RefusesStagesThatDoNotTileTheModelOrDisagree) {
  const auto refusal = [](const Stages& s, int layers) {
    absl::StatusOr<std::unique_ptr<StageGroup>> g = StageGroup::Create(s.executors(), layers);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(g.status().message());
  };
  EXPECT_THAT(
      refusal(Stages({{0, 3}, {4, 8}}), 8),
      HasSubstr("stage 1 (layers 4:8) does not start where the stage before ends (layer 3)"));
  EXPECT_THAT(refusal(Stages({{0, 3}, {2, 8}}), 8), HasSubstr("stage 1 (layers 2:8)"));
  EXPECT_THAT(refusal(Stages({{0, 3}, {3, 6}}), 8),
              HasSubstr("the stages end at layer 6 of the model's 8"));
  Stages other_model({{0, 3}, {3, 8}});
  other_model.stages[1]->mutable_info().model_fingerprint = "n";
  EXPECT_THAT(refusal(other_model, 8), HasSubstr("differs from stage 0 in its model fingerprint"));
  Stages other_blocks({{0, 3}, {3, 8}});
  other_blocks.stages[0]->mutable_info().block_size = 32;
  EXPECT_THAT(refusal(other_blocks, 8), HasSubstr("block size"));
  EXPECT_THAT(refusal(Stages({}), 8), HasSubstr("needs a stage"));
}

TEST(StageGroupTest, RunsEveryStageAtOnceAndAnswersWithTheLast) {
  Stages s({{0, 2}, {2, 5}, {5, 8}});
  for (auto& stage : s.stages) stage->wait_for_all = true;  // deadlocks unless run at once
  absl::StatusOr<std::unique_ptr<StageGroup>> group = StageGroup::Create(s.executors(), 8);
  ASSERT_TRUE(group.ok());
  StepCommand step;
  step.step_id = 42;
  const absl::StatusOr<StepResult> r = (*group)->Execute(step);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step_id, 42);
  ASSERT_EQ(r->sampled.size(), 1u);
  EXPECT_EQ(r->sampled[0].seq_id, 5) << "the last stage's result";
  EXPECT_EQ(s.entered.load(), 3);
  for (const auto& stage : s.stages) EXPECT_FALSE(stage->abandoned.load());
}

TEST(StageGroupTest, AStagesErrorIsTheGroupsAndAbandonsTheOthers) {
  // The first stage dies; the last waits for activations that will never come, until it is
  // abandoned.
  Stages s({{0, 2}, {2, 5}});
  s.stages[0]->error = absl::UnavailableError("the worker's stream broke");
  s.stages[1]->wait_for_abandon = true;
  absl::StatusOr<std::unique_ptr<StageGroup>> group = StageGroup::Create(s.executors(), 5);
  ASSERT_TRUE(group.ok());
  absl::StatusOr<StepResult> r = (*group)->Execute(StepCommand());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("stage 0: the worker's stream broke"));
  EXPECT_TRUE(s.stages[1]->abandoned.load());

  // The last stage fails: the group answers with its error, naming it.
  Stages t({{0, 2}, {2, 5}});
  t.stages[1]->error = absl::InternalError("worker rejected step: bad block");
  group = StageGroup::Create(t.executors(), 5);
  ASSERT_TRUE(group.ok());
  r = (*group)->Execute(StepCommand());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("stage 1: worker rejected step: bad block"));
}

// Each stage's timing of a step goes to its own series (RouterMetrics::Stage): compute is its
// forward time less its wait and its send; the first stage waits for nothing, the last sends
// nothing. A stage's insane figures (a worker's result is untrusted) are not recorded.
TEST(StageGroupTest, RecordsEachStagesComputeWaitAndSend) {
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  Stages s({{0, 2}, {2, 5}});
  s.stages[0]->forward_seconds = 0.5;
  s.stages[0]->timing = {.wait_seconds = 0, .send_seconds = 0.125, .sent_bytes = 4096};
  s.stages[1]->forward_seconds = 0.75;
  s.stages[1]->timing = {.wait_seconds = 0.25, .send_seconds = 0, .sent_bytes = 0};
  absl::StatusOr<std::unique_ptr<StageGroup>> group =
      StageGroup::Create(s.executors(), 5, &metrics);
  ASSERT_TRUE(group.ok());
  ASSERT_TRUE((*group)->Execute(StepCommand()).ok());
  s.stages[1]->timing.wait_seconds = std::numeric_limits<double>::quiet_NaN();
  ASSERT_TRUE((*group)->Execute(StepCommand()).ok());
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("pagoda_stage_compute_seconds_sum{stage=\"0\"} 0.75\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_compute_seconds_sum{stage=\"1\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_compute_seconds_count{stage=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_wait_seconds_sum{stage=\"1\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_wait_seconds_count{stage=\"0\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_send_seconds_sum{stage=\"0\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_sent_bytes_total{stage=\"0\"} 8192\n"));
  EXPECT_THAT(text, HasSubstr("pagoda_stage_sent_bytes_total{stage=\"1\"} 0\n"));
}

}  // namespace
}  // namespace pagoda
