// The router core over one in-process worker (the offline mode): golden outputs, batch
// invariance, the caller's request ids, validation, cancellation and broken workers.
#include "router/core/engine.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/algorithm/container.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/block_pool.h"
#include "tests/router/core/engine_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using testing::Result;

class EngineTest : public testing::EngineFixture {};

TEST_F(EngineTest, GreedyMatchesRunCAloneAndBatched) {
  Start(/*num_blocks=*/512);
  for (const auto& c : golden()) {
    const int64_t id = Add(c.prompt_ids);
    auto results = RunAll();
    EXPECT_EQ(results[id].outputs[0], c.greedy_ids) << c.prompt;
  }
  std::vector<int64_t> ids;
  for (const auto& c : golden()) ids.push_back(Add(c.prompt_ids));
  auto results = RunAll();
  for (size_t i = 0; i < ids.size(); ++i) {
    const Result& r = results[ids[i]];
    EXPECT_EQ(r.outputs[0], golden()[i].greedy_ids) << golden()[i].prompt;
    // run.c stops on BOS (a stop) or at steps_total positions (a length limit).
    EXPECT_EQ(r.reasons[0], r.outputs[0].back() == 1 ? FinishReason::kStop : FinishReason::kLength);
  }
}

TEST_F(EngineTest, ThirtyTwoPromptsTogetherGiveTheSameTokensAsOneAtATime) {
  Start(/*num_blocks=*/1024);
  const auto prompts = ManyPrompts();
  ASSERT_EQ(prompts.size(), 32u);
  std::vector<std::vector<int>> alone;
  for (const auto& p : prompts) {
    const int64_t id = Add(p, Greedy(), 1, 96);
    alone.push_back(RunAll()[id].outputs[0]);
  }
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(Add(p, Greedy(), 1, 96));
  auto together = RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]].outputs[0], alone[i]) << "prompt " << i;
  }
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndSeedsMatter) {
  Start(512);
  const auto& p = golden()[1].prompt_ids;
  const int64_t a = Add(p, Sampled(11)), b = Add(p, Sampled(11)), c = Add(p, Sampled(12));
  auto r = RunAll();
  EXPECT_EQ(r[a].outputs[0], r[b].outputs[0]);
  EXPECT_NE(r[a].outputs[0], r[c].outputs[0]);
}

TEST_F(EngineTest, RequestsThatCanNeverFitAreRejectedAtOnce) {
  Start(/*num_blocks=*/8, /*max_model_len=*/512);
  GenerationRequest r;
  r.prompt_ids = std::vector<int>(600, 5);
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("prompt"));
  r.prompt_ids = std::vector<int>(100, 5);
  r.max_tokens = 100;  // 200 tokens need 13 blocks; the pool has 8
  const absl::Status s = engine_->AddRequest(1, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("blocks"));
  r.max_tokens = 500;
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("model length"));
  r.max_tokens = 0;
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("max_tokens"));
  r.max_tokens = 5;
  r.prompt_ids = {1, 999};
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("999"));
  r.prompt_ids = {};
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("prompt"));
  r.prompt_ids = {1};
  r.n = 100;
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("n = 100"));
  EXPECT_FALSE(engine_->has_unfinished());
}

TEST_F(EngineTest, AbortFreesBlocksMidGeneration) {
  Start(512);
  const int64_t keep = Add(golden()[0].prompt_ids);
  const int64_t drop = Add(golden()[1].prompt_ids, Greedy(), 2);
  std::map<int64_t, Result> partial;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(StepInto(partial));
  EXPECT_GT(engine_->scheduler().kv().pool().num_used_blocks(), 0);
  EXPECT_EQ(partial[drop].outputs.size(), 2u) << "both forks were running";
  engine_->AbortRequest(drop);
  auto r = RunAll(partial);  // checks that every block came back
  EXPECT_EQ(r[keep].outputs[0], golden()[0].greedy_ids);
}

TEST_F(EngineTest, AbortSequenceDropsOneForkAndKeepsTheOther) {
  Start(512);
  GenerationRequest r;
  r.prompt_ids = golden()[0].prompt_ids;
  r.sampling = Greedy();
  r.n = 2;
  const int64_t id = Add(r);
  std::map<int64_t, Result> partial;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(StepInto(partial));
  ASSERT_EQ(engine_->scheduler().num_running(), 2);
  EXPECT_TRUE(engine_->AbortSequence(id, 1));
  EXPECT_EQ(engine_->scheduler().num_running(), 1) << "the fork leaves the batch at once";
  EXPECT_FALSE(engine_->AbortSequence(id, 7)) << "no such sequence";
  const size_t dropped_len = partial[id].outputs[1].size();
  auto r2 = RunAll(partial);  // and every block comes back
  EXPECT_EQ(r2[id].outputs[0], golden()[0].greedy_ids);
  EXPECT_EQ(r2[id].outputs[1].size(), dropped_len);
}

// Passes steps to a real worker but spoils its answers, as a broken remote worker might.
class SpoilingExecutor final : public Executor {
 public:
  SpoilingExecutor(Executor* real, std::function<void(StepResult&)> spoil)
      : real_(real), spoil_(std::move(spoil)) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    absl::StatusOr<StepResult> r = real_->Execute(command);
    if (r.ok()) spoil_(*r);
    return r;
  }

 private:
  Executor* real_;
  std::function<void(StepResult&)> spoil_;
};

TEST_F(EngineTest, AMalformedWorkerReplyIsAnErrorNotACrash) {
  const std::vector<std::function<void(StepResult&)>> spoils = {
      [](StepResult& r) { r.sampled.clear(); },
      [](StepResult& r) { r.sampled.push_back(r.sampled.front()); },
      [](StepResult& r) { r.sampled.front().token_id = 99999; },
      [](StepResult& r) { r.sampled.front().seq_id += 1000; },
      [](StepResult& r) { r.step_id += 1; },
  };
  for (const auto& spoil : spoils) {
    Start(64);  // a fresh worker: the previous case left its sequence there
    SpoilingExecutor bad(executor_.get(), spoil);
    EngineOptions eo;
    eo.max_model_len = 257;
    Engine engine(config_, &bad, eo);
    GenerationRequest r;
    r.prompt_ids = golden()[0].prompt_ids;
    r.sampling = Greedy();
    ASSERT_TRUE(engine.AddRequest(/*request_id=*/0, r).ok());
    const absl::Status status = engine.Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_THAT(status.message(), HasSubstr("worker"));
  }
}

// The router's request ids are the engine's: updates carry the caller's id, and a request may
// arrive in parts (sequences resumed after a worker failure) under that one id.
TEST_F(EngineTest, UpdatesCarryTheCallersIdAndARequestMayArriveInParts) {
  Start(512);
  const auto& c = golden()[1];
  GenerationRequest pair;
  pair.prompt_ids = c.prompt_ids;
  pair.sampling = Greedy();
  pair.n = 2;
  ASSERT_TRUE(engine_->AddRequest(42, pair).ok());
  GenerationRequest resumed = pair;  // its third sequence, 5 tokens in
  resumed.n = 1;
  resumed.first_seq_index = 2;
  resumed.output_ids.assign(c.greedy_ids.begin(), c.greedy_ids.begin() + 5);
  ASSERT_TRUE(engine_->AddRequest(42, resumed).ok());
  EXPECT_EQ(engine_->AddRequest(42, resumed).code(), absl::StatusCode::kAlreadyExists);
  auto r = RunAll();
  ASSERT_EQ(r.size(), 1u) << "every update carries request id 42";
  ASSERT_EQ(r[42].outputs.size(), 3u);
  EXPECT_EQ(r[42].outputs[0], c.greedy_ids);
  EXPECT_EQ(r[42].outputs[1], c.greedy_ids);
  EXPECT_EQ(r[42].outputs[2], std::vector<int>(c.greedy_ids.begin() + 5, c.greedy_ids.end()));
  // Finished, the id is free again.
  EXPECT_TRUE(engine_->AddRequest(42, resumed).ok());
  RunAll();
}

TEST_F(EngineTest, AbortRequestEndsEveryPartOfTheRequest) {
  Start(512);
  GenerationRequest r;
  r.prompt_ids = golden()[0].prompt_ids;
  r.sampling = Greedy();
  r.ignore_eos = true;
  ASSERT_TRUE(engine_->AddRequest(7, r).ok());
  r.first_seq_index = 1;
  ASSERT_TRUE(engine_->AddRequest(7, r).ok());
  std::map<int64_t, Result> partial;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(StepInto(partial));
  EXPECT_EQ(engine_->scheduler().num_running(), 2);
  engine_->AbortRequest(7);
  EXPECT_FALSE(engine_->has_unfinished());
  RunAll(partial);  // and every block comes back
}

// The Cluster validates a request once for all workers; a worker's engine then checks only its
// own limit, its pool, while AddRequest (the offline path) makes the full check.
TEST_F(EngineTest, AddValidatedRequestChecksOnlyThePool) {
  Start(/*num_blocks=*/8);
  GenerationRequest r;
  r.prompt_ids = {1, 5, 6};
  r.sampling = Greedy();
  r.max_tokens = 4;
  r.stop_token_ids.assign(kMaxStopTokenIds + 1, 2);
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("stop_token_ids"));
  EXPECT_TRUE(engine_->AddValidatedRequest(1, r).ok()) << "trusted: validated elsewhere";
  r.max_tokens = 200;  // needs 13 blocks; the pool has 8
  EXPECT_THAT(engine_->AddValidatedRequest(2, r).message(), HasSubstr("blocks"));
  RunAll();
}

// The prompt's block hashes that placement computed are the scheduler's when the block sizes
// agree. Seen here through hashes that do not match the tokens, which then never hit.
TEST_F(EngineTest, APromptsPrecomputedBlockHashesAreUsedWhenTheBlockSizeMatches) {
  Start(512);
  const std::vector<int>& p = golden()[5].prompt_ids;  // 19 tokens: one full block of 16
  Add(p);
  RunAll();  // its block is cached now
  auto cached_tokens = [&](int block_size, std::vector<uint64_t> hashes) {
    GenerationRequest r;
    r.prompt_ids = p;
    r.sampling = Greedy();
    r.prompt_block_size = block_size;
    r.prompt_block_hashes = std::move(hashes);
    const int64_t id = Add(r);
    return RunAll()[id].num_cached_tokens;
  };
  EXPECT_EQ(cached_tokens(16, BlockHashes(p, 16)), 16);
  EXPECT_EQ(cached_tokens(16, {12345}), 0) << "used, though wrong";
  EXPECT_EQ(cached_tokens(8, {12345, 678}), 16) << "another block size: hashed again";
}

// min_tokens holds back every id that would end the sequence (the model's EOS here) until that
// many tokens are out; greedy is otherwise unchanged up to where it would have stopped.
TEST_F(EngineTest, MinTokensHoldsBackTheStopTokensUntilReached) {
  Start(512);
  const testing::GoldenCase* stopped = nullptr;
  for (const auto& c : golden()) {  // the shortest that stops on EOS
    if (absl::c_linear_search(config_.eos_ids, c.greedy_ids.back()) &&
        (stopped == nullptr || c.greedy_ids.size() < stopped->greedy_ids.size())) {
      stopped = &c;
    }
  }
  ASSERT_NE(stopped, nullptr) << "no golden case stops early on EOS";
  const int natural = static_cast<int>(stopped->greedy_ids.size());  // the EOS included
  SamplingParams p = Greedy();
  p.min_tokens = natural + 10;
  const int64_t id = Add(stopped->prompt_ids, p, /*n=*/1, /*max_tokens=*/natural + 40);
  const std::vector<int> out = RunAll()[id].outputs[0];
  ASSERT_GE(static_cast<int>(out.size()), p.min_tokens);
  EXPECT_TRUE(std::equal(stopped->greedy_ids.begin(), stopped->greedy_ids.end() - 1, out.begin()))
      << "the tokens before the stop are greedy's";
  for (int i = 0; i < p.min_tokens; ++i) {
    EXPECT_FALSE(absl::c_linear_search(config_.eos_ids, out[i])) << "EOS at " << i;
  }
}

TEST_F(EngineTest, LogitBiasBansAndForcesTokensBeforeGreedysChoice) {
  Start(512);
  const auto& c = golden()[1];
  SamplingParams banned = Greedy();
  banned.logit_bias = {{c.greedy_ids[0], -100.0f}};
  SamplingParams forced = Greedy();
  forced.logit_bias = {{77, 100.0f}};
  const int64_t a = Add(c.prompt_ids, banned, 1, 8), b = Add(c.prompt_ids, forced, 1, 8);
  auto r = RunAll();
  EXPECT_NE(r[a].outputs[0][0], c.greedy_ids[0]);
  EXPECT_EQ(r[b].outputs[0], std::vector<int>(8, 77));
}

// A sequence preempted and recomputed, or resumed on another worker from its output so far
// (what the Cluster sends after a worker failure), samples exactly what one run alone does:
// the seed, logit_bias and min_tokens' count all come with the step.
TEST_F(EngineTest, MinTokensAndLogitBiasAreExactAcrossPreemptionAndResumption) {
  auto request = [&](int i) {
    GenerationRequest r;
    r.prompt_ids = ManyPrompts()[i];
    r.sampling = Sampled(100 + i);
    r.sampling.min_tokens = 60;
    r.sampling.logit_bias = {{13, -100.0f}, {29, 3.0f}, {300, 2.0f}};
    r.max_tokens = 90;
    return r;
  };
  constexpr int kNum = 8;
  Start(/*num_blocks=*/512);
  std::vector<std::vector<int>> alone;
  for (int i = 0; i < kNum; ++i) {
    const int64_t id = Add(request(i));
    alone.push_back(RunAll()[id].outputs.at(0));
  }
  for (const auto& out : alone) {
    ASSERT_GE(out.size(), 60u);
    EXPECT_FALSE(absl::c_linear_search(out, 13)) << "a banned token";
  }
  // Too few blocks for all of them: the scheduler preempts and recomputes.
  Start(/*num_blocks=*/24);
  std::vector<int64_t> ids;
  for (int i = 0; i < kNum; ++i) ids.push_back(Add(request(i)));
  auto crowded = RunAll();
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0);
  for (int i = 0; i < kNum; ++i) EXPECT_EQ(crowded[ids[i]].outputs[0], alone[i]) << i;
  // Resumed elsewhere 30 tokens in, before min_tokens.
  Start(/*num_blocks=*/512);
  for (int i = 0; i < kNum; ++i) {
    GenerationRequest resumed = request(i);
    resumed.output_ids.assign(alone[i].begin(), alone[i].begin() + 30);
    const int64_t id = Add(resumed);
    const std::vector<int> rest = RunAll()[id].outputs.at(0);
    EXPECT_EQ(rest, std::vector<int>(alone[i].begin() + 30, alone[i].end())) << i;
  }
}

// A worker short of blocks hands the sequences it preempted to a peer with room
// (Engine::DetachPreempted): they leave with their tokens and the full blocks they had
// computed that are still cached, held until the peer has pulled them; none leaves past the
// room the peer gave.
TEST_F(EngineTest, PreemptedSequencesDetachWithTheirCachedBlocks) {
  // Four sequences of up to 257 tokens (16 blocks) in 24 blocks: they preempt as they grow.
  Start(/*num_blocks=*/24);
  std::map<int64_t, std::vector<int>> prompts;
  for (int i = 0; i < 4; ++i) prompts[Add(ManyPrompts()[i])] = ManyPrompts()[i];
  std::map<int64_t, Result> results;
  while (engine_->scheduler().num_waiting_preempted() == 0) ASSERT_TRUE(StepInto(results));
  EXPECT_TRUE(engine_->DetachPreempted(/*max_blocks=*/0).empty());
  const int num_preempted = engine_->scheduler().num_waiting_preempted();
  const int num_waiting = engine_->scheduler().num_waiting();
  std::vector<Scheduler::Detached> detached = engine_->DetachPreempted(/*max_blocks=*/1 << 20);
  ASSERT_EQ(static_cast<int>(detached.size()), num_preempted);
  EXPECT_EQ(engine_->scheduler().num_waiting_preempted(), 0);
  EXPECT_EQ(engine_->scheduler().num_waiting(), num_waiting - num_preempted);
  int64_t held = 0, with_blocks = 0;
  for (const Scheduler::Detached& d : detached) {
    EXPECT_TRUE(d.preempted);
    std::vector<int> tokens = prompts.at(d.request_id);
    const std::vector<int>& out = results[d.request_id].outputs.at(0);
    tokens.insert(tokens.end(), out.begin(), out.end());
    EXPECT_EQ(d.tokens, tokens) << "what it delivered is what it takes along";
    EXPECT_EQ(d.num_computed, static_cast<int>(d.blocks.size()) * 16);
    EXPECT_LT(d.num_computed, static_cast<int>(d.tokens.size()));
    held += static_cast<int64_t>(d.blocks.size());
    with_blocks += !d.blocks.empty();
  }
  EXPECT_GT(with_blocks, 0) << "a sequence preempted this step still has cached blocks";
  EXPECT_EQ(engine_->transfers().num_held_blocks(), held);
  for (const Scheduler::Detached& d : detached) {
    engine_->transfers().Release(d.blocks);
    results.erase(d.request_id);
  }
  EXPECT_EQ(engine_->transfers().num_held_blocks(), 0);
  // The rest run to their ends, and nothing leaks.
  RunAll(std::move(results));
}

TEST_F(EngineTest, BadMinTokensAndLogitBiasAreRefusedNamingTheField) {
  Start(64);
  GenerationRequest r;
  r.prompt_ids = golden()[0].prompt_ids;
  r.max_tokens = 5;
  r.sampling.min_tokens = 6;
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("min_tokens"));
  r.sampling.min_tokens = -1;
  EXPECT_THAT(engine_->AddRequest(1, r).message(), HasSubstr("min_tokens"));
  r.sampling.min_tokens = 0;
  for (const std::vector<LogitBias>& bias :
       std::vector<std::vector<LogitBias>>{{{config_.vocab_size, 1.0f}},
                                           {{-1, 1.0f}},
                                           {{5, 100.5f}},
                                           {{5, -101.0f}},
                                           {{5, std::nanf("")}},
                                           {{7, 1.0f}, {5, 1.0f}},
                                           {{5, 1.0f}, {5, 2.0f}},
                                           std::vector<LogitBias>(kMaxLogitBiasEntries + 1)}) {
    r.sampling.logit_bias = bias;
    const absl::Status s = engine_->AddRequest(1, r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("logit_bias"));
  }
  EXPECT_FALSE(engine_->has_unfinished());
}

TEST_F(EngineTest, AWorkerThatEndsASequenceBeforeMinTokensIsBroken) {
  Start(64);
  SpoilingExecutor bad(executor_.get(),
                       [this](StepResult& r) { r.sampled.front().token_id = config_.eos_ids[0]; });
  EngineOptions eo;
  eo.max_model_len = 257;
  Engine engine(config_, &bad, eo);
  GenerationRequest r;
  r.prompt_ids = golden()[0].prompt_ids;
  r.sampling = Greedy();
  r.sampling.min_tokens = 3;
  ASSERT_TRUE(engine.AddRequest(0, r).ok());
  const absl::Status status = engine.Step().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(status.message(), HasSubstr("min_tokens"));
}

}  // namespace
}  // namespace pagoda
