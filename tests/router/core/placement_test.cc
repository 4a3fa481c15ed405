#include "router/core/placement.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

// Idle workers, listed in the given order.
std::vector<WorkerLoad> Idle(std::vector<int> ids) {
  std::vector<WorkerLoad> workers;
  for (int id : ids) workers.push_back({.worker_id = id});
  return workers;
}

PlacementOptions Policy(PlacementPolicy policy) {
  PlacementOptions o;
  o.policy = policy;
  return o;
}

const std::vector<uint64_t> kPromptA = {11, 12, 13};  // chained hashes of three full blocks
const std::vector<uint64_t> kPromptB = {21, 22, 23};
const std::vector<uint64_t> kPromptC = {31, 32, 33};

TEST(PlacementTest, ARequestGoesWhereItsPromptsBlocksWereSent) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  EXPECT_EQ(placement.Choose(Idle({0, 1}), kPromptA), 0) << "a tie goes to the first";
  EXPECT_EQ(placement.Choose(Idle({1, 0}), kPromptA), 0);
  EXPECT_EQ(placement.Choose(Idle({1, 0}), kPromptB), 1) << "a new prompt: a tie again";
  // A prompt that shares only A's first block still prefers A's worker.
  EXPECT_EQ(placement.Choose(Idle({1, 0}), std::vector<uint64_t>{11, 99}), 0);
}

TEST(PlacementTest, OnlyTheLeadingRunOfHintedBlocksCounts) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  ASSERT_EQ(placement.Choose(Idle({0, 1}), std::vector<uint64_t>{50, 51}), 0);
  ASSERT_EQ(placement.Choose(Idle({1, 0}), std::vector<uint64_t>{60}), 1);
  // Worker 0 was sent block 51 but not this prompt's first block: no hit there.
  EXPECT_EQ(placement.Choose(Idle({1, 0}), std::vector<uint64_t>{60, 51}), 1);
}

TEST(PlacementTest, LoadOutweighsAShortCachedPrefixUnlessItsWeightIsRaised) {
  std::vector<WorkerLoad> workers = Idle({0, 1});
  workers[0].num_used_blocks = 10;  // worker 0 was sent A but is busy
  Placement light(Policy(PlacementPolicy::kPrefixAware));
  ASSERT_EQ(light.Choose(Idle({0, 1}), kPromptA), 0);
  EXPECT_EQ(light.Choose(workers, kPromptA), 1) << "3 uncached blocks cost less than 10 in use";

  PlacementOptions heavy_options = Policy(PlacementPolicy::kPrefixAware);
  heavy_options.prefix_weight = 5;  // 15 for three uncached blocks
  Placement heavy(heavy_options);
  ASSERT_EQ(heavy.Choose(Idle({0, 1}), kPromptA), 0);
  EXPECT_EQ(heavy.Choose(workers, kPromptA), 0);
}

TEST(PlacementTest, RequestsQueuedOnAWorkerCountAsLoad) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  std::vector<WorkerLoad> workers = Idle({0, 1});
  workers[0].num_waiting = 1;  // costs (3 + 1) blocks for a three-block prompt
  workers[1].num_used_blocks = 3;
  EXPECT_EQ(placement.Choose(workers, kPromptA), 1);
  workers[1].num_used_blocks = 5;
  EXPECT_EQ(placement.Choose(workers, kPromptB), 0);
}

TEST(PlacementTest, RoundRobinTakesTurnsWhateverTheLoadOrThePrefix) {
  Placement placement(Policy(PlacementPolicy::kRoundRobin));
  std::vector<WorkerLoad> workers = Idle({4, 5, 6});
  workers[0].num_used_blocks = 1000;
  std::vector<int> chosen;
  for (int i = 0; i < 6; ++i) chosen.push_back(placement.Choose(workers, kPromptA));
  EXPECT_EQ(chosen, (std::vector<int>{4, 5, 6, 4, 5, 6}));
}

TEST(PlacementTest, LeastLoadedIgnoresThePrefix) {
  Placement placement(Policy(PlacementPolicy::kLeastLoaded));
  std::vector<WorkerLoad> workers = Idle({0, 1, 2});
  workers[0].num_used_blocks = 4;
  workers[1].num_used_blocks = 2;
  workers[2].num_used_blocks = 2;
  EXPECT_EQ(placement.Choose(workers, kPromptA), 1) << "the least loaded; a tie to the first";
  workers[1].num_used_blocks = 3;
  EXPECT_EQ(placement.Choose(workers, kPromptA), 2) << "A's blocks on worker 1 do not matter";
  workers[2].num_waiting = 1;  // (3 + 1) blocks for the queued request
  EXPECT_EQ(placement.Choose(workers, kPromptA), 1);
}

TEST(PlacementTest, TheHintsAreBoundedAndForgottenAllAtOncePastTheBound) {
  PlacementOptions o = Policy(PlacementPolicy::kPrefixAware);
  o.max_hints = 4;
  Placement placement(o);
  ASSERT_EQ(placement.Choose(Idle({0, 1}), kPromptA), 0);
  ASSERT_EQ(placement.Choose(Idle({1, 0}), kPromptB), 1);
  EXPECT_EQ(placement.num_hints(), 6) << "past the bound only before the next placement";
  ASSERT_EQ(placement.Choose(Idle({1, 0}), kPromptC), 1);
  EXPECT_EQ(placement.num_hints(), 3) << "A's and B's hints went";
  EXPECT_EQ(placement.Choose(Idle({1, 0}), kPromptA), 1) << "A no longer pulls to worker 0";
}

TEST(PlacementTest, AWorkerThatLeftIsForgotten) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  ASSERT_EQ(placement.Choose(Idle({0, 1}), kPromptA), 0);
  ASSERT_EQ(placement.Choose(Idle({1, 0}), kPromptB), 1);
  placement.ForgetWorker(0);
  EXPECT_EQ(placement.num_hints(), 3) << "only worker 1's blocks are left";
  EXPECT_EQ(placement.Choose(Idle({1, 0}), kPromptA), 1);
  EXPECT_EQ(placement.Choose(Idle({0, 1}), kPromptB), 1) << "worker 1's hints stay";
}

TEST(PlacementTest, ABlockSentToSeveralWorkersIsEachOnesUpToFour) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  const std::vector<uint64_t> prompt = {1, 2, 3};
  for (int w = 0; w < 5; ++w) {
    std::vector<WorkerLoad> only = {{.worker_id = w}};
    ASSERT_EQ(placement.Choose(only, prompt), w);
  }
  // The four sent it last, the most recent first: worker 0's claim went.
  EXPECT_THAT(placement.Owners(prompt)[2], ::testing::ElementsAre(4, 3, 2, 1));
  // Workers 1 and 4 both have it: the less loaded of them takes the next one.
  std::vector<WorkerLoad> workers = {
      {.worker_id = 0}, {.worker_id = 4, .num_used_blocks = 2}, {.worker_id = 1}};
  EXPECT_EQ(placement.Choose(workers, prompt), 1);
  placement.ForgetWorker(1);
  EXPECT_THAT(placement.Owners(prompt)[0], ::testing::ElementsAre(4, 3, 2));
}

TEST(PlacementTest, AWorkerThatCanPullAPrefixIsChosenByLoad) {
  Placement placement(Policy(PlacementPolicy::kPrefixAware));
  const std::vector<uint64_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_EQ(placement.Choose(Idle({0, 1}), prompt), 0);
  // Worker 0 holds 4 blocks of work now. Worker 1, without transfers, would compute all 10
  // blocks: worker 0 still wins.
  std::vector<WorkerLoad> workers = {{.worker_id = 0, .num_used_blocks = 4}, {.worker_id = 1}};
  EXPECT_EQ(placement.Choose(workers, prompt), 0);
  // Able to pull them (at a tenth of computing), worker 1 is the cheaper.
  workers[1].can_pull = true;
  EXPECT_EQ(placement.Choose(workers, prompt), 1);
  // While worker 1 pulls them, only the source has them: a request placed on worker 1 then
  // asks worker 0 (or waits for that pull) rather than count them as there.
  placement.Remember(prompt, 0, /*instead_of=*/1);
  for (const Placement::OwnerList& owners : placement.Owners(prompt)) {
    EXPECT_THAT(owners, ::testing::ElementsAre(0));
  }
  placement.Remember(prompt, 1);  // the pull ended
  for (const Placement::OwnerList& owners : placement.Owners(prompt)) {
    EXPECT_THAT(owners, ::testing::ElementsAre(1, 0));
  }
}

}  // namespace
}  // namespace pagoda
