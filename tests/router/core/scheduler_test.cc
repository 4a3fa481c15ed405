// The scheduler through the engine and a real worker: preemption, KV reservation, prefix
// caching, forks with copy-on-write and chunked prefill, all checked against run.c's tokens.
#include "router/core/scheduler.h"

#include <map>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/core/engine_fixture.h"

namespace pagoda {
namespace {

using testing::Result;

class SchedulerTest : public testing::EngineFixture {};

TEST_F(SchedulerTest, PreemptionUnderASmallPoolStillGivesTheSameTokens) {
  // Each golden sequence needs up to 16 blocks; 40 blocks cannot hold all six at once.
  std::map<int, std::vector<int>> greedy_small, sampled_small, sampled_large;
  Start(/*num_blocks=*/40);
  std::vector<int64_t> g, s;
  for (const auto& c : golden()) g.push_back(Add(c.prompt_ids));
  for (size_t i = 0; i < golden().size(); ++i)
    s.push_back(Add(golden()[i].prompt_ids, Sampled(7 + i)));
  auto small = RunAll();
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0) << "the pool was meant to be too small";
  for (size_t i = 0; i < golden().size(); ++i) {
    EXPECT_EQ(small[g[i]].outputs[0], golden()[i].greedy_ids) << golden()[i].prompt;
  }

  Start(/*num_blocks=*/1024);
  std::vector<int64_t> s2;
  for (size_t i = 0; i < golden().size(); ++i)
    s2.push_back(Add(golden()[i].prompt_ids, Sampled(7 + i)));
  auto large = RunAll();
  EXPECT_EQ(engine_->scheduler().num_preemptions(), 0);
  for (size_t i = 0; i < golden().size(); ++i) {
    EXPECT_EQ(small[s[i]].outputs[0], large[s2[i]].outputs[0]) << "seeded prompt " << i;
    EXPECT_NE(large[s2[i]].outputs[0], golden()[i].greedy_ids) << "sampling should differ";
  }
}

TEST_F(SchedulerTest, MaxLenReservationTakesEveryBlockAtAdmissionAndRunsFewerAtOnce) {
  // 40 blocks of 16: a sequence that may grow to 257 tokens reserves 16 of them up front, so
  // max-len runs two at a time where on-demand runs all six golden prompts.
  std::map<KvReservation, int> peak;
  for (KvReservation mode : {KvReservation::kMaxLen, KvReservation::kOnDemand}) {
    Start(/*num_blocks=*/40, 257, 512, mode);
    const int64_t first = Add(golden()[0].prompt_ids);
    std::map<int64_t, Result> results;
    ASSERT_TRUE(StepInto(results));
    const int prompt_blocks = (golden()[0].prompt_ids.size() + 15) / 16;
    EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(),
              mode == KvReservation::kMaxLen ? 16 : prompt_blocks);
    std::vector<int64_t> ids = {first};
    for (size_t i = 1; i < golden().size(); ++i) ids.push_back(Add(golden()[i].prompt_ids));
    results = RunAll(std::move(results));
    peak[mode] = peak_running_;
    if (mode == KvReservation::kMaxLen) {
      EXPECT_EQ(engine_->scheduler().num_preemptions(), 0) << "everything was reserved";
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(results[ids[i]].outputs[0], golden()[i].greedy_ids) << golden()[i].prompt;
    }
  }
  EXPECT_EQ(peak[KvReservation::kMaxLen], 2);
  EXPECT_EQ(peak[KvReservation::kOnDemand], static_cast<int>(golden().size()));
}

TEST_F(SchedulerTest, WithPrefixCachingOffEveryPromptIsComputed) {
  Start(512, 257, 512, KvReservation::kOnDemand, /*prefix_caching=*/false);
  const auto& p = golden()[5].prompt_ids;
  const int64_t first = Add(p);
  auto r1 = RunAll();
  const int64_t second = Add(p);
  auto r2 = RunAll();
  EXPECT_EQ(r2[second].num_cached_tokens, 0);
  EXPECT_EQ(r2[second].outputs[0], r1[first].outputs[0]);
  EXPECT_EQ(engine_->scheduler().kv().num_prefix_hit_tokens(), 0);
}

TEST_F(SchedulerTest, ARepeatedPrefixIsServedFromTheCache) {
  Start(512);
  const auto& p = golden()[5].prompt_ids;  // 19 tokens: one full block of 16
  const int64_t first = Add(p);
  auto r1 = RunAll();
  EXPECT_EQ(r1[first].num_cached_tokens, 0);
  const int64_t second = Add(p);
  auto r2 = RunAll();
  EXPECT_EQ(r2[second].num_cached_tokens, 16);
  EXPECT_EQ(r2[second].outputs[0], r1[first].outputs[0]);
  EXPECT_GT(engine_->scheduler().kv().num_prefix_hit_tokens(), 0);
}

// Requests that arrive together with one long system prompt: the first computes it, the
// others wait for its blocks instead of each computing its own copy, and get them from the
// cache (vLLM would compute it in every request admitted before the first one's step ended).
TEST_F(SchedulerTest, RequestsArrivingTogetherComputeASharedPrefixOnce) {
  Start(/*num_blocks=*/512);
  const auto suffixes = ManyPrompts();
  std::vector<int> system = {1};
  for (int i = 0; system.size() < 70; ++i) {
    system.insert(system.end(), suffixes[i].begin() + 1, suffixes[i].end());
  }
  system.resize(70);  // four full blocks, then six tokens that each prompt's block 4 holds
  std::vector<std::vector<int>> prompts, alone;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(system);
    prompts.back().insert(prompts.back().end(), suffixes[8 + i].begin() + 1, suffixes[8 + i].end());
  }
  for (const auto& p : prompts) {
    Start(512);  // a fresh cache for each: nothing shared
    const int64_t id = Add(p, Greedy(), 1, 24);
    alone.push_back(RunAll()[id].outputs[0]);
  }
  Start(512);
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(Add(p, Greedy(), 1, 24));
  auto together = RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]].outputs[0], alone[i]) << "prompt " << i;
    EXPECT_EQ(together[ids[i]].num_cached_tokens, i == 0 ? 0 : 64) << "prompt " << i;
  }
  EXPECT_EQ(engine_->scheduler().kv().num_prefix_hit_tokens(), 7 * 64);
}

// A waiting request does not wait on a prefix nobody is computing: distinct prompts are all
// admitted in the first step, and so is the second of two alike when the first one's client
// stopped reading (a paused sequence is not scheduled, so it would never fill the blocks).
TEST_F(SchedulerTest, NoRequestWaitsOnAPrefixNobodyIsComputing) {
  Start(/*num_blocks=*/512);
  const auto prompts = ManyPrompts();
  for (int i = 0; i < 4; ++i) Add(prompts[i]);
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(engine_->scheduler().num_running(), 4);
  EXPECT_EQ(engine_->scheduler().num_waiting(), 0);
  RunAll();

  // A budget of 32 tokens a step: the first computes its 80-token prompt in three steps.
  Start(/*num_blocks=*/512, /*max_model_len=*/257, /*max_num_batched_tokens=*/32);
  std::vector<int> prompt;
  for (int i = 0; prompt.size() < 80; ++i) {
    prompt.insert(prompt.end(), prompts[i].begin() + (i > 0), prompts[i].end());
  }
  prompt.resize(80);
  auto paused = std::make_shared<std::atomic<bool>>(false);
  GenerationRequest first;
  first.prompt_ids = prompt;
  first.sampling = Greedy();
  first.max_tokens = 4;
  first.paused = paused;
  Add(first);
  const int64_t second = Add(prompt, Greedy(), 1, 4);
  std::map<int64_t, Result> results;
  ASSERT_TRUE(StepInto(results));  // the first computes tokens 0-31 (the whole budget)
  paused->store(true);
  ASSERT_TRUE(StepInto(results));
  EXPECT_EQ(engine_->scheduler().num_running(), 2) << "the first is paused: nothing to wait for";
  EXPECT_EQ(engine_->scheduler().num_waiting(), 0);
  paused->store(false);
  results = RunAll(results);
  EXPECT_EQ(results[second].outputs[0].size(), 4u);
  EXPECT_EQ(results[second].num_cached_tokens, 32);
}

TEST_F(SchedulerTest, ForksShareThePromptAndCopyOnWriteKeepsThemCorrect) {
  // Greedy forks must each equal the golden output: any KV corruption from sharing the
  // partial prompt block (13 tokens: 12 shared, then each fork writes position 12) shows.
  Start(512);
  const auto& c = golden()[1];
  ASSERT_NE((c.prompt_ids.size() - 1) % 16, 0u) << "the case must share a partial block";
  const int64_t id = Add(c.prompt_ids, Greedy(), /*n=*/3);
  auto r = RunAll();
  ASSERT_EQ(r[id].outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[id].outputs[i], c.greedy_ids) << "fork " << i;

  // Sampled forks differ from each other but are reproducible, also under preemption.
  const int64_t s = Add(c.prompt_ids, Sampled(3), 4);
  auto sampled = RunAll();
  EXPECT_NE(sampled[s].outputs[0], sampled[s].outputs[1]);
  Start(/*num_blocks=*/24);
  const int64_t s2 = Add(c.prompt_ids, Sampled(3), 4);
  auto small = RunAll();
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0);
  EXPECT_EQ(small[s2].outputs, sampled[s].outputs);
}

TEST_F(SchedulerTest, LongPromptsArePrefilledInChunks) {
  // A 64-token step budget cuts the prompts into chunks while others decode.
  Start(512, 257, /*max_num_batched_tokens=*/64);
  std::vector<int64_t> ids;
  for (const auto& c : golden()) ids.push_back(Add(c.prompt_ids));
  const std::vector<int> long_prompt = [&] {
    std::vector<int> p = golden()[0].prompt_ids;
    p.insert(p.end(), golden()[0].greedy_ids.begin(), golden()[0].greedy_ids.begin() + 150);
    return p;
  }();
  const int64_t long_id = Add(long_prompt, Greedy(), 1, 20);
  auto r = RunAll();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(r[ids[i]].outputs[0], golden()[i].greedy_ids);
  // Continuing the golden text from inside it must reproduce the golden continuation.
  EXPECT_EQ(r[long_id].outputs[0], std::vector<int>(golden()[0].greedy_ids.begin() + 150,
                                                    golden()[0].greedy_ids.begin() + 170));
}

}  // namespace
}  // namespace pagoda
