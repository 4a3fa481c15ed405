// The DraftPlanner's rules (router/spec/draft_planner.h), thread-free: a fake proposer, a
// commit that records what it was given, and step times fed as a worker would report them.
#include "router/spec/draft_planner.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

// Proposes tokens 100, 101, ... : as many as asked, or at most `max_tokens`.
class FakeProposer : public DraftProposer {
 public:
  int Propose(std::span<const int> /*tokens*/, int k, std::vector<int>* draft) override {
    const int n = std::min(k, max_tokens);
    for (int i = 0; i < n; ++i) draft->push_back(100 + i);
    return n;
  }
  void Finished(std::span<const int> tokens, int num_prompt_tokens) override {
    finished_outputs.push_back(static_cast<int>(tokens.size()) - num_prompt_tokens);
  }
  int max_tokens = 1000;
  std::vector<int> finished_outputs;  // output lengths of the sequences Finished was told of
};

// A step of `num_seqs` decoding sequences (one token each, 10 computed) and their slots.
struct Step {
  explicit Step(int num_seqs, int max_tokens = 32) : acceptance(num_seqs) {
    for (int i = 0; i < num_seqs; ++i) {
      scheduled.push_back({.seq_id = i,
                           .token_ids = {5},
                           .num_computed_tokens = 10,
                           .new_block_ids = {},
                           .sample = true});
      slots.push_back({.index = static_cast<size_t>(i),
                       .tokens = tokens,
                       .first_position = 11,
                       .max_tokens = max_tokens,
                       .acceptance = &acceptance[i]});
    }
  }
  std::vector<int> tokens = std::vector<int>(11, 7);
  std::vector<ScheduledSequence> scheduled;
  std::vector<AcceptanceStats> acceptance;
  std::vector<DraftSlot> slots;
};

class DraftPlannerTest : public ::testing::Test {
 protected:
  DraftPlanner MakePlanner(int num_speculative_tokens = 4, int max_step_tokens = 8) {
    return DraftPlanner({.proposer = &proposer_,
                         .num_speculative_tokens = num_speculative_tokens,
                         .max_step_tokens = max_step_tokens});
  }
  // Plans `step` with the budgets; returns the draft size each slot got (0: none). Slots in
  // `refuse` are refused at commit.
  std::vector<int> Plan(DraftPlanner& planner, Step& step, int budget = 100, int logit_budget = 100,
                        std::vector<size_t> refuse = {}) {
    std::vector<int> sizes(step.slots.size(), 0);
    planner.Plan(step.scheduled, step.slots, budget, logit_budget,
                 [&](const DraftSlot& slot, std::span<const int> draft) {
                   EXPECT_EQ(draft[0], 100);  // the proposer's, from its first token
                   if (std::find(refuse.begin(), refuse.end(), slot.index) != refuse.end()) {
                     return false;
                   }
                   sizes[slot.index] = static_cast<int>(draft.size());
                   return true;
                 });
    return sizes;
  }
  // Decoding steps of one sequence with drafts of 0..4 tokens that took a + b·q seconds (q
  // query tokens), until the fit is ready.
  static void RecordDecodeSteps(DraftPlanner& planner, double a, double b) {
    for (int i = 0; i < 50; ++i) {
      const int draft = i % 5;
      StepCommand step;
      step.scheduled.push_back({.seq_id = 1,
                                .token_ids = std::vector<int>(1 + draft, 3),
                                .num_computed_tokens = 10,
                                .new_block_ids = {},
                                .sample = true,
                                .num_draft_tokens = draft});
      planner.RecordStepTime(step, a + b * (1 + draft));
    }
    ASSERT_TRUE(planner.step_time().ready());
  }

  FakeProposer proposer_;
};

TEST_F(DraftPlannerTest, IsOffWithoutAProposer) {
  DraftPlanner planner({.num_speculative_tokens = 4, .max_step_tokens = 8});
  EXPECT_FALSE(planner.enabled());
  planner.Finished(std::vector<int>{1, 2, 3}, 1);  // nothing to tell
  EXPECT_TRUE(MakePlanner().enabled());
}

TEST_F(DraftPlannerTest, BeforeTheFitDraftsWhileTheStepIsSmall) {
  DraftPlanner planner = MakePlanner(/*num_speculative_tokens=*/4, /*max_step_tokens=*/8);
  Step step(3);
  // 3 query tokens, room for 5 more: the first sequence's 4 (its optimistic initial rates
  // choose all 4), the second's 1, the third none.
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{4, 1, 0}));
}

TEST_F(DraftPlannerTest, BeforeTheFitARefusedDraftLeavesItsRoomToTheNext) {
  DraftPlanner planner = MakePlanner(4, 8);
  Step step(3);
  EXPECT_EQ(Plan(planner, step, 100, 100, /*refuse=*/{0}), (std::vector<int>{0, 4, 1}));
}

TEST_F(DraftPlannerTest, BeforeTheFitAShortProposalTakesOnlyItsTokens) {
  DraftPlanner planner = MakePlanner(4, 8);
  proposer_.max_tokens = 2;
  Step step(3);
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{2, 2, 1}));
}

TEST_F(DraftPlannerTest, TheStepsBudgetsAndTheSequencesLimitsBoundTheDraft) {
  DraftPlanner planner = MakePlanner(4, 100);
  {
    Step step(2);
    EXPECT_EQ(Plan(planner, step, /*budget=*/3), (std::vector<int>{3, 0}));
  }
  {
    Step step(2);
    EXPECT_EQ(Plan(planner, step, 100, /*logit_budget=*/5), (std::vector<int>{4, 1}));
  }
  {
    Step step(2, /*max_tokens=*/2);  // 3 tokens left to max_tokens or the model length
    EXPECT_EQ(Plan(planner, step), (std::vector<int>{2, 2}));
  }
  {
    Step step(1, /*max_tokens=*/0);  // its next token is its last: no draft, and no probe due
    for (int i = 0; i < 20; ++i) EXPECT_EQ(Plan(planner, step), (std::vector<int>{0}));
  }
}

TEST_F(DraftPlannerTest, BeforeTheFitAStepWithoutRoomProbesEverySixteenSteps) {
  DraftPlanner planner = MakePlanner(4, /*max_step_tokens=*/2);
  Step step(2);  // 2 query tokens: no room
  for (int i = 0; i < 16; ++i) ASSERT_EQ(Plan(planner, step), (std::vector<int>{0, 0})) << i;
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{1, 1}));  // a 1-token probe each
}

TEST_F(DraftPlannerTest, WhereTheWeightsReadDominatesAWholeDraftPays) {
  DraftPlanner planner = MakePlanner(/*num_speculative_tokens=*/8, /*max_step_tokens=*/2);
  RecordDecodeSteps(planner, /*a=*/0.075, /*b=*/0.002);
  // A token more costs 2.7% of a step, and a new sequence's first tokens are judged by this
  // worker's rates (0.9 until some draft is verified): all 8 pay, past max_step_tokens too.
  Step step(1);
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{8}));
}

TEST_F(DraftPlannerTest, WhereATokenCostsAStepADraftOnlyProbes) {
  DraftPlanner planner = MakePlanner(8, 100);
  RecordDecodeSteps(planner, /*a=*/0.0001, /*b=*/0.01);
  // A draft token costs what the step's own costs and is kept 9 times in 10: it never pays.
  // Probes come every ceil(N·b / t(Q) / 0.005) = ceil(0.01 / 0.0101 / 0.005) = 199 steps.
  Step step(1);
  for (int i = 0; i < 199; ++i) ASSERT_EQ(Plan(planner, step), (std::vector<int>{0})) << i;
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{1}));
}

TEST_F(DraftPlannerTest, EachDraftIsJudgedInTheStepTheEarlierOnesMade) {
  DraftPlanner planner = MakePlanner(8, 2);
  // a = 10 ms, b = 1 ms, 3 decoding sequences: the first draft of 8 pays; after it the step is
  // 11 tokens expected to yield 8.1, and a token more pays for fewer positions (7), and so on.
  RecordDecodeSteps(planner, 0.010, 0.001);
  Step step(3);
  EXPECT_EQ(Plan(planner, step), (std::vector<int>{8, 7, 6}));
}

TEST_F(DraftPlannerTest, RecordsOnlyDecodingStepsTimes) {
  DraftPlanner planner = MakePlanner();
  auto decode = [](int draft) {
    StepCommand step;
    step.scheduled.push_back({.seq_id = 1,
                              .token_ids = std::vector<int>(1 + draft, 3),
                              .num_computed_tokens = 10,
                              .new_block_ids = {},
                              .sample = true,
                              .num_draft_tokens = draft});
    return step;
  };
  for (int i = 0; i < 10; ++i) planner.RecordStepTime(decode(0), 0.05);
  // A 96-token chunk is not a size drafts choose between (it would give the fit its spread).
  StepCommand prefill;
  prefill.scheduled.push_back({.seq_id = 2,
                               .token_ids = std::vector<int>(96, 3),
                               .num_computed_tokens = 0,
                               .new_block_ids = {},
                               .sample = true});
  planner.RecordStepTime(prefill, 0.5);
  planner.RecordStepTime(StepCommand(), 0.001);  // only waited for KV transfers
  EXPECT_FALSE(planner.step_time().ready());     // one size so far
  for (int i = 0; i < 10; ++i) planner.RecordStepTime(decode(4), 0.058);
  EXPECT_TRUE(planner.step_time().ready());
}

TEST_F(DraftPlannerTest, SettleCountsDraftsByPosition) {
  DraftPlanner planner = MakePlanner();
  AcceptanceStats a, b;
  planner.Settle(&a, 4, 2);
  planner.Settle(&b, 3, 3);
  planner.Settle(&a, 1, 0);
  const SpecDecodeStats& stats = planner.stats();
  EXPECT_EQ(stats.num_drafts, 3);
  EXPECT_EQ(stats.num_draft_tokens, 8);
  EXPECT_EQ(stats.num_accepted_tokens, 5);
  EXPECT_EQ(stats.accepted_per_position, (std::vector<int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(a.num_drafts(), 2);
  EXPECT_EQ(a.num_accepted_tokens(), 2);
  EXPECT_EQ(b.num_accepted_tokens(), 3);
}

// Under the cost rule a sequence's first draft was chosen by the worker's rates: its own rates
// start from them (before the fit, from AcceptanceStats' optimistic initial ones).
TEST_F(DraftPlannerTest, AFirstDraftSettledUnderTheCostRuleStartsFromTheWorkersRates) {
  DraftPlanner planner = MakePlanner();
  AcceptanceStats worker({.alpha = 0.05f});  // the planner's, replayed
  AcceptanceStats missed;
  for (int i = 0; i < 20; ++i) {
    planner.Settle(&missed, 2, 0);
    worker.Record(2, 0);
  }
  AcceptanceStats before_fit;
  planner.Settle(&before_fit, 1, 1);
  worker.Record(1, 1);
  EXPECT_FLOAT_EQ(before_fit.rate(0), 0.9f + 0.2f * (1 - 0.9f));  // its own initial rate

  RecordDecodeSteps(planner, 0.075, 0.002);
  AcceptanceStats after_fit;
  const float from = worker.rate(0);
  planner.Settle(&after_fit, 1, 1);
  EXPECT_LT(from, 0.5f);
  EXPECT_FLOAT_EQ(after_fit.rate(0), from + 0.2f * (1 - from));
}

TEST_F(DraftPlannerTest, TellsTheProposerOfFinishedSequences) {
  DraftPlanner planner = MakePlanner();
  planner.Finished(std::vector<int>{1, 2, 3, 4, 5}, 3);
  EXPECT_EQ(proposer_.finished_outputs, (std::vector<int>{2}));
}

}  // namespace
}  // namespace pagoda
