// Speculative decoding end to end over a real stories260K worker: the router drafts, the worker
// verifies, and what comes out is the tokens decoding without drafts gives, greedy or sampled,
// alone or batched, through preemption, stop tokens and length limits; nothing leaks.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/router/core/engine_fixture.h"

namespace pagoda {
namespace {

using testing::Result;

// The real worker's steps, reported as taking a + b·q seconds for q query tokens (which decides
// where drafts pay): tests that do not depend on the machine's speed.
class TimedExecutor : public Executor {
 public:
  TimedExecutor(Executor* real, double a, double b) : real_(real), a_(a), b_(b) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    absl::StatusOr<StepResult> r = real_->Execute(command);
    int q = 0;
    drafts_.clear();
    for (const ScheduledSequence& s : command.scheduled) {
      q += static_cast<int>(s.token_ids.size());
      if (s.num_draft_tokens > 0) drafts_.push_back(s.num_draft_tokens);
    }
    if (r.ok()) r->forward_seconds = a_ + b_ * q;
    return r;
  }
  // The last step's drafts' sizes.
  const std::vector<int>& drafts() const { return drafts_; }

 private:
  Executor* real_;
  double a_, b_;
  std::vector<int> drafts_;
};

class SpeculativeTest : public testing::EngineFixture {
 protected:
  void TearDown() override { engine_.reset(); }  // before the executor it borrows

  // Steps cost a seconds plus b per query token: by default a 1.1B-like worker whose steps
  // cost what reading its weights costs, so drafts pay.
  void StartWithDrafts(bool drafts, int num_blocks, int max_model_len = 257,
                       SpeculativeMethod method = SpeculativeMethod::kNgram, double a = 0.08,
                       double b = 0.002) {
    speculative_.method = drafts ? method : SpeculativeMethod::kOff;
    speculative_.num_speculative_tokens = 5;
    speculative_.max_step_tokens = 64;
    Start(num_blocks, max_model_len);
    timed_ = std::make_unique<TimedExecutor>(executor_.get(), a, b);
    EngineOptions eo;  // as Start's
    eo.max_num_batched_tokens = 512;
    eo.max_num_seqs = 64;
    eo.max_model_len = max_model_len;
    eo.speculative = speculative_;
    engine_ = std::make_unique<Engine>(config_, timed_.get(), eo);
  }
  const SpecDecodeStats& stats() const { return engine_->scheduler().spec_stats(); }

  std::unique_ptr<TimedExecutor> timed_;
};

TEST_F(SpeculativeTest, GreedyIsRunCsTokensWithDraftsAloneAndBatched) {
  StartWithDrafts(true, 512);
  for (const auto& c : golden()) {
    const int64_t id = Add(c.prompt_ids);
    EXPECT_EQ(RunAll()[id].outputs[0], c.greedy_ids) << c.prompt;
  }
  std::vector<int64_t> ids;
  for (const auto& c : golden()) ids.push_back(Add(c.prompt_ids));
  auto results = RunAll();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(results[ids[i]].outputs[0], golden()[i].greedy_ids) << golden()[i].prompt;
  }
  // Stories repeat themselves: the drafts were used, and some were right.
  EXPECT_GT(stats().num_drafts, 0);
  EXPECT_GT(stats().num_accepted_tokens, 0);
  EXPECT_LT(stats().num_accepted_tokens, stats().num_draft_tokens);
  ASSERT_FALSE(stats().accepted_per_position.empty());
  EXPECT_LE(stats().accepted_per_position[0], stats().num_drafts);
}

// Sampling with penalties (their history includes the kept draft tokens), logprobs, min_tokens,
// extra stop tokens, n > 1 and max_tokens: the same tokens and log probabilities either way.
TEST_F(SpeculativeTest, SeededSamplingGivesTheSameTokensWithAndWithoutDrafts) {
  const auto prompts = ManyPrompts();
  auto run = [&](bool drafts) {
    StartWithDrafts(drafts, 1024);
    std::vector<int64_t> ids;
    for (size_t i = 0; i < prompts.size(); i += 4) {
      GenerationRequest r;
      r.prompt_ids = prompts[i];
      r.sampling = Sampled(100 + i);
      r.sampling.temperature = 0.5f;
      r.sampling.repetition_penalty = 1.1f;
      r.sampling.frequency_penalty = 0.2f;
      r.sampling.logprobs = 2;
      r.sampling.min_tokens = 3;
      r.stop_token_ids = {prompts[i].back()};
      r.n = 3;
      r.max_tokens = 40 + static_cast<int>(i);
      ids.push_back(Add(r));
    }
    std::map<int64_t, Result> results = RunAll();
    std::vector<Result> out;
    for (int64_t id : ids) out.push_back(results[id]);
    return out;
  };
  const std::vector<Result> without = run(false);
  const std::vector<Result> with = run(true);
  EXPECT_GT(stats().num_accepted_tokens, 0);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].outputs, without[i].outputs) << "request " << i;
    EXPECT_EQ(with[i].reasons, without[i].reasons) << "request " << i;
    // Rows verified together round differently in the last bits (as batched rows do).
    ASSERT_EQ(with[i].logprobs.size(), without[i].logprobs.size());
    for (size_t j = 0; j < with[i].logprobs.size(); ++j) {
      ASSERT_EQ(with[i].logprobs[j].size(), without[i].logprobs[j].size());
      for (size_t t = 0; t < with[i].logprobs[j].size(); ++t) {
        EXPECT_NEAR(with[i].logprobs[j][t], without[i].logprobs[j][t], 1e-4)
            << "request " << i << " sample " << j << " token " << t;
      }
    }
  }
}

// 32 sequences in a pool too small for them: preemptions and recomputes with drafts in
// flight, and the greedy tokens are those of one sequence at a time without drafts.
TEST_F(SpeculativeTest, PreemptionWithDraftsKeepsTheTokensAndLeaksNothing) {
  const auto prompts = ManyPrompts();
  StartWithDrafts(false, 1024);
  std::vector<std::vector<int>> alone;
  for (const auto& p : prompts) {
    const int64_t id = Add(p, Greedy(), 1, 120);
    alone.push_back(RunAll()[id].outputs[0]);
  }
  StartWithDrafts(true, /*num_blocks=*/40);
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(Add(p, Greedy(), 1, 120));
  auto together = RunAll();  // checks that no block or worker sequence is left
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0);
  EXPECT_GT(stats().num_accepted_tokens, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]].outputs[0], alone[i]) << "prompt " << i;
  }
}

// A draft never takes the output past max_tokens or the model length.
TEST_F(SpeculativeTest, DraftsStopAtMaxTokensAndTheModelLength) {
  const auto& c = golden()[0];
  for (int max_tokens : {1, 2, 3, 7, 30}) {
    StartWithDrafts(true, 512);
    const int64_t id = Add(c.prompt_ids, Greedy(), 1, max_tokens);
    const Result r = RunAll()[id];
    const std::vector<int> expected(
        c.greedy_ids.begin(),
        c.greedy_ids.begin() + std::min<size_t>(max_tokens, c.greedy_ids.size()));
    EXPECT_EQ(r.outputs[0], expected) << "max_tokens " << max_tokens;
  }
  const int max_model_len = static_cast<int>(c.prompt_ids.size()) + 20;
  StartWithDrafts(true, 512, max_model_len);
  const int64_t id = Add(c.prompt_ids);
  const Result r = RunAll()[id];
  ASSERT_GE(c.greedy_ids.size(), 20u);
  EXPECT_EQ(r.outputs[0], std::vector<int>(c.greedy_ids.begin(), c.greedy_ids.begin() + 20));
  EXPECT_EQ(r.reasons[0], FinishReason::kLength);
}

// The suffix index drafts from earlier requests' outputs: a story told again is drafted whole,
// with the same tokens.
TEST_F(SpeculativeTest, SuffixDraftsComeFromEarlierRequestsOutputs) {
  const auto& c = golden()[2];
  StartWithDrafts(true, 512, 257, SpeculativeMethod::kSuffix);
  const int64_t first = Add(c.prompt_ids);
  EXPECT_EQ(RunAll()[first].outputs[0], c.greedy_ids);
  const SpecDecodeStats once = stats();
  const int64_t again = Add(c.prompt_ids);
  EXPECT_EQ(RunAll()[again].outputs[0], c.greedy_ids);
  const int64_t drafted = stats().num_draft_tokens - once.num_draft_tokens;
  const int64_t kept = stats().num_accepted_tokens - once.num_accepted_tokens;
  EXPECT_GT(kept, once.num_accepted_tokens);  // more than prompt lookup found the first time
  EXPECT_GT(kept, drafted * 9 / 10) << kept << " of " << drafted;
}

// Drafts go where they pay for their cost: on a worker whose step costs b per query token and
// nothing more (a = 0: a draft token costs what a sequence's token costs) no draft pays, and
// once the step time is measured only rare one-token probes remain; on one whose step is
// mostly the weights' read, the same requests draft all the way.
TEST_F(SpeculativeTest, DraftsOnlyWhereTheyPayForTheirCost) {
  const auto& c = golden()[2];
  for (const bool pays : {false, true}) {
    StartWithDrafts(true, 512, 257, SpeculativeMethod::kSuffix, pays ? 0.05 : 0, 0.001);
    std::map<int64_t, Result> results;
    int64_t steps = 0, probes = 0, longer = 0, id = -1;
    for (int round = 0; round < 3; ++round) {  // a story told three times: drafts are right
      id = Add(c.prompt_ids);
      while (engine_->has_unfinished()) {
        const bool measured = engine_->scheduler().drafts().step_time().ready();
        ASSERT_TRUE(StepInto(results));
        if (!measured) continue;
        ++steps;
        for (int k : timed_->drafts()) ++(k == 1 ? probes : longer);
      }
      EXPECT_EQ(results[id].outputs[0], c.greedy_ids) << "round " << round;
    }
    ExpectNothingLeaked();
    ASSERT_GT(steps, 100) << pays;
    const StepTimeModel& time = engine_->scheduler().drafts().step_time();
    EXPECT_NEAR(time.a(), pays ? 0.05 : 0, 1e-9);
    EXPECT_NEAR(time.b(), 0.001, 1e-9);
    if (pays) {
      EXPECT_GT(longer, steps / 10) << probes << " probes in " << steps << " steps";
    } else {
      EXPECT_EQ(longer, 0);
      EXPECT_LE(probes, steps / 50) << steps << " steps";  // one in 100 steps per sequence
    }
  }
}

// A worker's reply to a draft is checked: the samples must be the kept draft tokens, then
// exactly one that is not (or the one after a whole draft).
class DraftSpoilingExecutor : public Executor {
 public:
  DraftSpoilingExecutor(Executor* real,
                        std::function<void(const ScheduledSequence&, StepResult&)> spoil)
      : real_(real), spoil_(std::move(spoil)) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    absl::StatusOr<StepResult> r = real_->Execute(command);
    for (const ScheduledSequence& s : command.scheduled) {
      if (r.ok() && s.num_draft_tokens > 0 && !spoiled_) {
        spoil_(s, *r);
        spoiled_ = true;
      }
    }
    return r;
  }
  bool spoiled_ = false;

 private:
  Executor* real_;
  std::function<void(const ScheduledSequence&, StepResult&)> spoil_;
};

TEST_F(SpeculativeTest, AWorkerThatMisreportsADraftIsBroken) {
  const std::vector<std::function<void(const ScheduledSequence&, StepResult&)>> spoils = {
      // One sample too many.
      [](const ScheduledSequence&, StepResult& r) { r.sampled.push_back(r.sampled.back()); },
      // The whole draft kept, and no token after it.
      [](const ScheduledSequence& s, StepResult& r) {
        const int64_t id = r.sampled.front().seq_id;
        r.sampled.clear();
        for (size_t i = s.token_ids.size() - s.num_draft_tokens; i < s.token_ids.size(); ++i) {
          SampledToken t;
          t.seq_id = id;
          t.token_id = s.token_ids[i];
          r.sampled.push_back(t);
        }
      },
  };
  for (const auto& spoil : spoils) {
    StartWithDrafts(true, 512);
    DraftSpoilingExecutor bad(executor_.get(), spoil);
    EngineOptions eo;
    eo.max_model_len = 257;
    eo.speculative = speculative_;
    Engine engine(config_, &bad, eo);
    GenerationRequest r;
    r.prompt_ids = golden()[0].prompt_ids;
    r.sampling = Greedy();
    ASSERT_TRUE(engine.AddRequest(/*request_id=*/0, r).ok());
    absl::Status status;
    while (status.ok() && !bad.spoiled_ && engine.has_unfinished()) status = engine.Step().status();
    ASSERT_TRUE(bad.spoiled_);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_NE(status.message().find("draft"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace pagoda
