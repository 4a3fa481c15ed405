#include "router/core/step_budget.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

Sequence Prompt(int num_tokens) {
  Sequence seq;
  seq.tokens.assign(num_tokens, 7);
  seq.num_prompt_tokens = num_tokens;
  return seq;
}

TEST(StepBudgetTest, AChunkThatSamplesCostsOneRowAndFitsWholeOrNotAtAll) {
  const Sequence seq = Prompt(100);
  EXPECT_EQ(StepBudget::LogitRows(seq, 0, 64), 0);  // a chunk of the prompt: no row
  EXPECT_EQ(StepBudget::LogitRows(seq, 64, 100), 1);
  StepBudget budget(/*tokens=*/80, /*logit_rows=*/1);
  EXPECT_EQ(budget.Fit(seq, 0, 100), 80);  // the tokens left cut it (its end samples nothing)
  EXPECT_EQ(budget.Fit(seq, 64, 36), 36);
  budget.Take(seq, 64, 100);
  EXPECT_EQ(budget.tokens(), 44);
  EXPECT_EQ(budget.logit_rows(), 0);
  // No row left: a chunk ending at the last token does not fit; one that ends before it does.
  EXPECT_EQ(budget.Fit(seq, 64, 36), 0);
  EXPECT_EQ(budget.Fit(seq, 0, 30), 30);
}

TEST(StepBudgetTest, ASequenceThatNeedsEveryRowIsCutToTheRowsLeft) {
  Sequence seq = Prompt(100);
  seq.sampling.prompt_logprobs = 1;  // every prompt row's log probabilities
  ASSERT_TRUE(seq.needs_every_row());
  EXPECT_EQ(StepBudget::LogitRows(seq, 10, 30), 20);
  StepBudget budget(/*tokens=*/64, /*logit_rows=*/16);
  EXPECT_EQ(budget.Fit(seq, 0, 100), 16);
  budget.Take(seq, 0, 16);
  EXPECT_EQ(budget.Fit(seq, 16, 84), 0);
  EXPECT_EQ(budget.tokens(), 48);
}

TEST(StepBudgetTest, AMeanPooledEmbeddingNeedsEveryRowALastPooledOneOnlyItsLast) {
  Sequence mean = Prompt(10);
  mean.pooling = Pooling::kMean;
  EXPECT_EQ(StepBudget::LogitRows(mean, 0, 10), 10);
  Sequence last = Prompt(10);
  last.pooling = Pooling::kLast;
  EXPECT_EQ(StepBudget::LogitRows(last, 0, 10), 1);
  EXPECT_EQ(StepBudget::LogitRows(last, 0, 9), 0);
}

}  // namespace
}  // namespace pagoda
