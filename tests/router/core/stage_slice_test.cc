// StageSlice (issue 40 item 3): a stage group's micro-batch slices. Scripted stages check how a
// group splits (a slice per stage, fewer where a share would not hold the longest sequence),
// what a slice sends its stages (its block share, ids in its own residue class) and gets back,
// that two slices' steps overlap (one stage computes one slice's step while the next stage
// computes the other's) in one order at every stage, and that an adapter change reaches the
// stages once however many slices ask.
#include "router/core/stage_slice.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;

// A stage that records what it is sent and answers every scheduled sequence with a token.
// `gate`, when set, holds each step until it returns true (with the stage's mutex released).
class RecordingStage final : public Executor {
 public:
  RecordingStage(int begin, int end, int num_blocks) {
    info_.model_fingerprint = "m";
    info_.block_size = 16;
    info_.kv_cache_dtype = "f32";
    info_.num_blocks = num_blocks;
    info_.max_num_batched_tokens = 512;
    info_.max_num_seqs = 64;
    info_.layer_begin = begin;
    info_.layer_end = end;
  }
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    {
      absl::MutexLock lock(&mu);
      commands.push_back(command);
      ++running;
    }
    if (gate) gate(command);
    StepResult r;
    r.step_id = command.step_id;
    for (const ScheduledSequence& s : command.scheduled) {
      SampledToken& t = r.sampled.emplace_back();
      t.seq_id = s.seq_id;
      t.token_id = info_.layer_end;
    }
    absl::MutexLock lock(&mu);
    --running;
    return r;
  }
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override {
    absl::MutexLock lock(&mu);
    changes.push_back(change.path.empty() ? "-" + change.name : "+" + change.name);
    return AdapterInfo{.name = change.name, .rank = 8, .digest = "d"};
  }
  std::vector<int64_t> step_ids() {
    absl::MutexLock lock(&mu);
    std::vector<int64_t> ids;
    for (const StepCommand& c : commands) ids.push_back(c.step_id);
    return ids;
  }

  absl::Mutex mu;
  std::vector<StepCommand> commands ABSL_GUARDED_BY(mu);
  std::vector<std::string> changes ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu) = 0;
  std::function<void(const StepCommand&)> gate;

 private:
  WorkerInfo info_;
};

ScheduledSequence Scheduled(int64_t seq_id, std::vector<int> new_blocks) {
  ScheduledSequence s;
  s.seq_id = seq_id;
  s.token_ids = {9};
  s.new_block_ids = std::move(new_blocks);
  s.sample = true;
  return s;
}

std::shared_ptr<StageGroup> Group(const std::vector<std::shared_ptr<RecordingStage>>& stages,
                                  int num_layers) {
  std::vector<std::shared_ptr<Executor>> executors(stages.begin(), stages.end());
  absl::StatusOr<std::unique_ptr<StageGroup>> g = StageGroup::Create(executors, num_layers);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::shared_ptr<StageGroup>(*std::move(g));
}

TEST(StageSliceTest, AGroupSplitsIntoASlicePerStageUnlessAShareWouldNotHoldTheLongest) {
  auto two = Group(
      {std::make_shared<RecordingStage>(0, 2, 101), std::make_shared<RecordingStage>(2, 4, 120)},
      4);
  std::vector<std::shared_ptr<StageSlice>> slices = StageSlice::Split(two, 16 * 50);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]->info().num_blocks, 51);  // of the fewest any stage has: 101
  EXPECT_EQ(slices[1]->info().num_blocks, 50);
  EXPECT_EQ(slices[0]->first_block(), 0);
  EXPECT_EQ(slices[1]->first_block(), 51);
  EXPECT_EQ(slices[1]->index(), 1);
  // A share of 50 blocks cannot hold 801 tokens: one slice, every block.
  slices = StageSlice::Split(two, 16 * 50 + 1);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]->info().num_blocks, 101);

  auto three =
      Group({std::make_shared<RecordingStage>(0, 1, 90), std::make_shared<RecordingStage>(1, 2, 90),
             std::make_shared<RecordingStage>(2, 4, 90)},
            4);
  slices = StageSlice::Split(three, 256);
  ASSERT_EQ(slices.size(), 3u);
  for (const auto& s : slices) EXPECT_EQ(s->info().num_blocks, 30);
  EXPECT_EQ(slices[2]->first_block(), 60);
}

TEST(StageSliceTest, ASliceSendsItsShareAndItsOwnIdsAndMapsTheAnswerBack) {
  std::vector<std::shared_ptr<RecordingStage>> stages = {
      std::make_shared<RecordingStage>(0, 2, 100), std::make_shared<RecordingStage>(2, 4, 100)};
  std::vector<std::shared_ptr<StageSlice>> slices = StageSlice::Split(Group(stages, 4), 0);
  ASSERT_EQ(slices.size(), 2u);
  StepCommand c;
  c.step_id = 7;
  c.finished_ids = {3};
  c.new_sequences.emplace_back().seq_id = 5;
  c.block_copies.push_back({.src = 1, .dst = 2});
  c.scheduled.push_back(Scheduled(5, {0, 4}));
  c.scheduled.push_back(Scheduled(6, {}));
  absl::StatusOr<StepResult> r = slices[1]->Execute(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step_id, 7);
  ASSERT_EQ(r->sampled.size(), 2u);
  EXPECT_EQ(r->sampled[0].seq_id, 5);
  EXPECT_EQ(r->sampled[1].seq_id, 6);
  EXPECT_EQ(r->sampled[0].token_id, 4);  // the last stage's answer
  for (const auto& stage : stages) {
    absl::MutexLock lock(&stage->mu);
    ASSERT_EQ(stage->commands.size(), 1u);
    const StepCommand& sent = stage->commands[0];
    EXPECT_EQ(sent.step_id, 7 * 2 + 1);
    EXPECT_THAT(sent.finished_ids, ElementsAre(3 * 2 + 1));
    EXPECT_EQ(sent.new_sequences[0].seq_id, 5 * 2 + 1);
    EXPECT_EQ(sent.scheduled[0].seq_id, 5 * 2 + 1);
    EXPECT_EQ(sent.scheduled[1].seq_id, 6 * 2 + 1);
    EXPECT_THAT(sent.scheduled[0].new_block_ids, ElementsAre(50, 54));
    EXPECT_EQ(sent.block_copies[0].src, 51);
    EXPECT_EQ(sent.block_copies[0].dst, 52);
  }
  // Slice 0's step 7 is another step at the stages.
  ASSERT_TRUE(slices[0]->Execute(c).ok());
  EXPECT_THAT(stages[0]->step_ids(), ElementsAre(15, 14));
}

// Slice 0's step is held at the last stage until the first stage runs slice 1's step: they
// overlap. Each stage takes the steps in the order they came to the group.
TEST(StageSliceTest, TwoSlicesStepsOverlapAcrossTheStagesInOneOrder) {
  std::vector<std::shared_ptr<RecordingStage>> stages = {
      std::make_shared<RecordingStage>(0, 2, 100), std::make_shared<RecordingStage>(2, 4, 100)};
  std::vector<std::shared_ptr<StageSlice>> slices = StageSlice::Split(Group(stages, 4), 0);
  absl::Notification second_began;
  std::atomic<bool> overlapped{false};
  stages[0]->gate = [&](const StepCommand& c) {
    if (c.step_id % 2 == 1) second_began.Notify();  // slice 1's
  };
  stages[1]->gate = [&](const StepCommand& c) {
    if (c.step_id % 2 == 0) {  // slice 0's: wait for the first stage to take slice 1's
      overlapped = second_began.WaitForNotificationWithTimeout(absl::Seconds(30));
    }
  };
  StepCommand c;
  c.step_id = 1;
  c.scheduled.push_back(Scheduled(0, {}));
  std::thread first([&] { ASSERT_TRUE(slices[0]->Execute(c).ok()); });
  // Slice 1's step comes second.
  while (stages[1]->step_ids().empty()) std::this_thread::yield();
  ASSERT_TRUE(slices[1]->Execute(c).ok());
  first.join();
  EXPECT_TRUE(overlapped);
  EXPECT_THAT(stages[0]->step_ids(), ElementsAre(2, 3));
  EXPECT_THAT(stages[1]->step_ids(), ElementsAre(2, 3));
}

TEST(StageSliceTest, AnAdapterChangeReachesEachStageOnceHoweverManySlicesAsk) {
  std::vector<std::shared_ptr<RecordingStage>> stages = {
      std::make_shared<RecordingStage>(0, 2, 100), std::make_shared<RecordingStage>(2, 4, 100)};
  std::vector<std::shared_ptr<StageSlice>> slices = StageSlice::Split(Group(stages, 4), 0);
  for (const auto& slice : slices) {
    absl::StatusOr<AdapterInfo> a = slice->ChangeAdapter({.name = "c", .path = "/a/c"});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->rank, 8);
    ASSERT_EQ(slice->info().adapters.size(), 1u);
    EXPECT_EQ(slice->info().adapters[0].name, "c");
  }
  for (const auto& slice : slices) {
    ASSERT_TRUE(slice->ChangeAdapter({.name = "c", .path = ""}).ok());
    EXPECT_TRUE(slice->info().adapters.empty());
  }
  for (const auto& stage : stages) {
    absl::MutexLock lock(&stage->mu);
    EXPECT_THAT(stage->changes, ElementsAre("+c", "-c"));
  }
}

}  // namespace
}  // namespace pagoda
