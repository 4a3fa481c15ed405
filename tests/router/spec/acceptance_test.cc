#include "router/spec/acceptance.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(AcceptanceStatsTest, ANewSequenceStartsOptimistic) {
  AcceptanceStats stats;
  EXPECT_FLOAT_EQ(stats.rate(0), 0.9f);
  EXPECT_EQ(stats.ChooseK(4), 4);
  EXPECT_EQ(stats.ChooseK(32), 11);  // 0.9^11 = 0.31, 0.9^12 = 0.28
  EXPECT_EQ(stats.ChooseK(0), 0);
  EXPECT_EQ(stats.ChooseK(-1), 0);
}

TEST(AcceptanceStatsTest, RecordsAcceptanceByPositionGivenTheEarlierOnes) {
  AcceptanceStats stats({.alpha = 0.5f, .initial_rate = 0.5f});
  stats.Record(4, 2);  // positions 0 and 1 accepted, 2 rejected, 3 never reached
  EXPECT_FLOAT_EQ(stats.rate(0), 0.75f);
  EXPECT_FLOAT_EQ(stats.rate(1), 0.75f);
  EXPECT_FLOAT_EQ(stats.rate(2), 0.25f);
  EXPECT_FLOAT_EQ(stats.rate(3), 0.5f);
  EXPECT_FLOAT_EQ(stats.expected(3), 0.75f * 0.75f * 0.25f);
  stats.Record(3, 3);  // all accepted: nothing rejected
  EXPECT_FLOAT_EQ(stats.rate(2), 0.625f);
  EXPECT_FLOAT_EQ(stats.rate(3), 0.5f);
  EXPECT_EQ(stats.num_drafts(), 2);
  EXPECT_EQ(stats.num_draft_tokens(), 7);
  EXPECT_EQ(stats.num_accepted_tokens(), 5);
}

TEST(AcceptanceStatsTest, ChoosesTheLargestKWhoseLastTokenStillPays) {
  AcceptanceStats stats({.alpha = 1.0f, .initial_rate = 1.0f, .min_expected = 0.3f});
  // alpha 1: a rate is its last observation.
  stats.Record(3, 2);  // rates 1 1 0 1 ...
  EXPECT_EQ(stats.ChooseK(8), 2);
  stats.Record(1, 0);  // rate(0) = 0
  EXPECT_EQ(stats.ChooseK(8), 0);
}

TEST(AcceptanceStatsTest, MissesShrinkKAndHitsGrowItBack) {
  AcceptanceStats stats;
  for (int i = 0; i < 20; ++i) stats.Record(stats.ChooseK(8), 0);
  EXPECT_EQ(stats.ChooseK(8), 0);
  for (int i = 0; i < 20; ++i) stats.Record(1, 1);
  EXPECT_GE(stats.ChooseK(8), 1);
}

TEST(AcceptanceStatsTest, ProbesOnceInAWhileAfterRatesFell) {
  AcceptanceStats stats({.alpha = 1.0f, .probe_every = 3});
  stats.Record(2, 0);
  EXPECT_EQ(stats.ChooseK(8), 0);
  stats.Record(0, 0);
  stats.Record(0, 0);
  EXPECT_EQ(stats.ChooseK(8), 0);
  stats.Record(0, 0);
  EXPECT_EQ(stats.ChooseK(8), 1);
  EXPECT_EQ(stats.ChooseK(0), 0);
  stats.Record(1, 1);  // the probe hit
  EXPECT_GE(stats.ChooseK(8), 1);
}

TEST(AcceptanceStatsTest, ProbesLessOftenWhenAskedTo) {
  AcceptanceStats stats({.probe_every = 3});
  for (int i = 0; i < 3; ++i) stats.Record(0, 0);
  EXPECT_TRUE(stats.ProbeDue(0));
  EXPECT_TRUE(stats.ProbeDue(3));
  EXPECT_FALSE(stats.ProbeDue(100));
  for (int i = 0; i < 97; ++i) stats.Record(0, 0);
  EXPECT_TRUE(stats.ProbeDue(100));
  stats.Record(1, 0);  // the probe: the count starts again
  EXPECT_FALSE(stats.ProbeDue(0));
  AcceptanceStats never({.probe_every = 0});
  for (int i = 0; i < 100; ++i) never.Record(0, 0);
  EXPECT_FALSE(never.ProbeDue(1));
}

TEST(AcceptanceStatsTest, CopiesAnotherOnesRatesNotItsCounts) {
  AcceptanceStats worker({.alpha = 1.0f});
  worker.Record(3, 1);  // rates 1 0 0.9 ...
  AcceptanceStats seq;
  seq.CopyRates(worker);
  EXPECT_FLOAT_EQ(seq.rate(0), 1.0f);
  EXPECT_FLOAT_EQ(seq.rate(1), 0.0f);
  EXPECT_FLOAT_EQ(seq.rate(2), 0.9f);
  EXPECT_EQ(seq.num_drafts(), 0);
}

TEST(AcceptanceStatsTest, PositionsPastTheLastShareItsRate) {
  AcceptanceStats stats({.alpha = 1.0f, .initial_rate = 1.0f});
  stats.Record(40, 30);  // position 30 rejected: the shared last slot ends at 0
  EXPECT_FLOAT_EQ(stats.rate(AcceptanceStats::kNumPositions - 1), 0.0f);
  EXPECT_FLOAT_EQ(stats.rate(1000), 0.0f);
  EXPECT_EQ(stats.ChooseK(100), AcceptanceStats::kNumPositions - 1);
}

TEST(AcceptanceStatsTest, ClampsCountsOutOfRange) {
  AcceptanceStats stats({.alpha = 1.0f});
  stats.Record(2, 5);  // accepted > proposed: both accepted
  EXPECT_FLOAT_EQ(stats.rate(0), 1.0f);
  EXPECT_FLOAT_EQ(stats.rate(1), 1.0f);
  stats.Record(-4, -1);  // nothing proposed
  stats.Record(3, -1);   // accepted < 0: position 0 rejected
  EXPECT_FLOAT_EQ(stats.rate(0), 0.0f);
  EXPECT_EQ(stats.num_draft_tokens(), 5);
  EXPECT_EQ(stats.num_accepted_tokens(), 2);
}

}  // namespace
}  // namespace pagoda
