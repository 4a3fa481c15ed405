// Clients that stop reading never block the others: their paused sequences give up their
// running slots and KV blocks to waiting requests (preempted by recompute, full blocks kept in
// the prefix cache), and once their clients read again they finish with the same tokens.
#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "router/core/scheduler.h"
#include "tests/router/core/engine_fixture.h"

namespace pagoda {
namespace {

using testing::Result;

class PausedPreemptionTest : public testing::EngineFixture {
 protected:
  // A request of `n` greedy samples of golden case `c` whose client can stop reading.
  int64_t AddPausable(const testing::GoldenCase& c, int n,
                      std::shared_ptr<std::atomic<bool>> paused) {
    GenerationRequest r;
    r.prompt_ids = c.prompt_ids;
    r.sampling = Greedy();
    r.n = n;
    r.paused = std::move(paused);
    return Add(r);
  }
  // Steps until `done` holds, at most `max_steps` times.
  template <typename Done>
  bool StepUntil(std::map<int64_t, Result>& results, Done done, int max_steps = 400) {
    for (int i = 0; i < max_steps && !done(); ++i) {
      if (!StepInto(results)) return false;
    }
    return done();
  }
};

// The fixture's engine runs 64 sequences at once: four requests of n = 16 whose clients stop
// reading hold every slot. A new request is admitted the next step all the same.
TEST_F(PausedPreemptionTest, PausedSequencesGiveTheirSlotsToAWaitingRequest) {
  Start(/*num_blocks=*/1024);
  auto paused = std::make_shared<std::atomic<bool>>(false);
  std::vector<int64_t> stalled;
  for (int i = 0; i < 4; ++i) stalled.push_back(AddPausable(golden()[i % 2], 16, paused));
  std::map<int64_t, Result> results;
  ASSERT_TRUE(StepUntil(results, [&] { return engine_->scheduler().num_running() == 64; }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(StepInto(results));  // a few tokens each
  paused->store(true);
  const testing::GoldenCase& honest_case = golden()[2];
  const int64_t honest = Add(honest_case.prompt_ids);
  ASSERT_TRUE(StepInto(results));
  EXPECT_EQ(engine_->scheduler().num_waiting(), 1) << "one paused sequence made room";
  EXPECT_EQ(engine_->scheduler().num_paused_preemptions(), 1);
  ASSERT_TRUE(StepUntil(results, [&] { return !engine_->has_unfinished(); }));
  EXPECT_EQ(results[honest].outputs[0], honest_case.greedy_ids);

  paused->store(false);  // the clients read again: every sample finishes as if never paused
  results = RunAll(std::move(results));
  for (size_t i = 0; i < stalled.size(); ++i) {
    ASSERT_EQ(results[stalled[i]].outputs.size(), 16u);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(results[stalled[i]].outputs[j], golden()[i % 2].greedy_ids) << i << "/" << j;
    }
  }
}

// Paused sequences hold nearly every block of a small pool: a waiting request gets blocks from
// them, and their full blocks stay cached, so the paused ones recompute little when resumed.
TEST_F(PausedPreemptionTest, PausedSequencesGiveTheirBlocksToAWaitingRequest) {
  Start(/*num_blocks=*/40);
  auto paused = std::make_shared<std::atomic<bool>>(false);
  const int64_t stalled = AddPausable(golden()[0], 4, paused);
  std::map<int64_t, Result> results;
  // Four samples of up to 16 blocks each: run until they hold all but one of the 40, fewer
  // than the honest prompt (19 tokens) needs.
  ASSERT_TRUE(
      StepUntil(results, [&] { return engine_->scheduler().kv().pool().num_used_blocks() >= 39; }));
  paused->store(true);
  const testing::GoldenCase& honest_case = golden()[5];
  ASSERT_GT(honest_case.prompt_ids.size(), 16u);
  const int64_t honest = Add(honest_case.prompt_ids);
  ASSERT_TRUE(StepUntil(results, [&] { return !engine_->has_unfinished(); }));
  EXPECT_EQ(results[honest].outputs[0], honest_case.greedy_ids);
  EXPECT_GT(engine_->scheduler().num_paused_preemptions(), 0);
  const int64_t hits_before = engine_->scheduler().kv().num_prefix_hit_tokens();

  paused->store(false);
  results = RunAll(std::move(results));
  for (int j = 0; j < 4; ++j) EXPECT_EQ(results[stalled].outputs[j], golden()[0].greedy_ids) << j;
  EXPECT_GT(engine_->scheduler().kv().num_prefix_hit_tokens(), hits_before)
      << "a resumed sequence finds its blocks in the prefix cache";
}

// Nothing is preempted for a request that is itself paused, nor while nothing waits.
TEST_F(PausedPreemptionTest, NoPreemptionWithoutAWaitingReader) {
  Start(/*num_blocks=*/1024);
  auto paused = std::make_shared<std::atomic<bool>>(false);
  for (int i = 0; i < 4; ++i) AddPausable(golden()[0], 16, paused);
  std::map<int64_t, Result> results;
  ASSERT_TRUE(StepUntil(results, [&] { return engine_->scheduler().num_running() == 64; }));
  paused->store(true);
  auto other_paused = std::make_shared<std::atomic<bool>>(true);
  AddPausable(golden()[1], 1, other_paused);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(StepInto(results));
  EXPECT_EQ(engine_->scheduler().num_preemptions(), 0);
  EXPECT_EQ(engine_->scheduler().num_running(), 64);
  paused->store(false);
  other_paused->store(false);
  RunAll(std::move(results));
}

}  // namespace
}  // namespace pagoda
