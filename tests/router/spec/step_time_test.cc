#include "router/spec/step_time.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(StepTimeModelTest, FitsAKnownLine) {
  StepTimeModel model;
  for (int i = 0; i < 50; ++i) {
    const int q = 1 + i % 9;
    model.Record(q, 0, 0.075 + 0.004 * q);
  }
  ASSERT_TRUE(model.ready());
  EXPECT_NEAR(model.a(), 0.075, 1e-9);
  EXPECT_NEAR(model.b(), 0.004, 1e-9);
  EXPECT_EQ(model.c(), 0);
  EXPECT_NEAR(model.Seconds(17, 0), 0.075 + 0.004 * 17, 1e-9);
}

// 32 sequences whose contexts grow by one key a step, some steps with a probe or a draft: the
// step's growth is attention (c), not fixed cost, and a draft token costs b + c·(its keys).
TEST(StepTimeModelTest, SeparatesAttentionFromFixedCost) {
  StepTimeModel model;
  auto seconds = [](int q, double keys) { return 0.0001 + 0.00002 * q + 5e-7 * keys; };
  for (int step = 0; step < 300; ++step) {
    const int q = 32 + step % 3;
    const double keys = 32 * (100.0 + step) + (q - 32) * (101.0 + step);
    model.Record(q, keys, seconds(q, keys));
  }
  ASSERT_TRUE(model.ready());
  EXPECT_NEAR(model.a(), 0.0001, 1e-9);
  EXPECT_NEAR(model.b(), 0.00002, 1e-10);
  EXPECT_NEAR(model.c(), 5e-7, 1e-12);
}

TEST(StepTimeModelTest, WaitsForStepsOfMoreThanOneSize) {
  StepTimeModel model;
  for (int i = 0; i < 100; ++i) model.Record(1, 0, 0.001);
  EXPECT_FALSE(model.ready());  // the slope is unknowable from these
  for (int i = 0; i < 4; ++i) model.Record(2, 0, 0.0015);
  EXPECT_FALSE(model.ready());  // not spread enough yet: a few steps' noise would be the slope
  for (int i = 0; i < 24; ++i) model.Record(2, 0, 0.0015);
  ASSERT_TRUE(model.ready());
  EXPECT_NEAR(model.b(), 0.0005, 1e-9);
  EXPECT_NEAR(model.a(), 0.0005, 1e-9);
}

TEST(StepTimeModelTest, DecaysTowardTheRecentSteps) {
  StepTimeModel model(0.99);
  for (int i = 0; i < 500; ++i) model.Record(1 + i % 8, 0, 0.010 + 0.001 * (1 + i % 8));
  EXPECT_NEAR(model.b(), 0.001, 1e-9);
  // The worker got slower per token (another process shares its cores).
  for (int i = 0; i < 50; ++i) model.Record(1 + i % 8, 0, 0.010 + 0.003 * (1 + i % 8));
  EXPECT_GT(model.b(), 0.0015);  // 50 steps: ~40% of the weight (the half-life is 69)
  EXPECT_LT(model.b(), 0.0025);
  for (int i = 0; i < 1000; ++i) model.Record(1 + i % 8, 0, 0.010 + 0.003 * (1 + i % 8));
  EXPECT_NEAR(model.b(), 0.003, 1e-6);
  EXPECT_NEAR(model.a(), 0.010, 1e-5);
}

TEST(StepTimeModelTest, KeepsTheLastFitWhileStepsHaveOneSize) {
  StepTimeModel model(0.99);
  for (int i = 0; i < 100; ++i) model.Record(1 + i % 4, 0, 0.002 + 0.001 * (1 + i % 4));
  ASSERT_TRUE(model.ready());
  for (int i = 0; i < 2000; ++i) model.Record(1, 0, 0.003);  // on the line: nothing moves
  EXPECT_TRUE(model.ready());
  EXPECT_NEAR(model.a(), 0.002, 1e-6);
  EXPECT_NEAR(model.b(), 0.001, 1e-6);
}

TEST(StepTimeModelTest, NeverFitsANegativeCost) {
  StepTimeModel compute_bound;  // t = b·q with a little noise: a line would cross below 0
  for (int i = 0; i < 40; ++i) {
    const int q = 1 + i % 8;
    compute_bound.Record(q, 0, 0.001 * q * (i % 2 == 0 ? 0.9 : 1.1) - (q == 1 ? 0.0002 : 0));
  }
  ASSERT_TRUE(compute_bound.ready());
  EXPECT_GE(compute_bound.a(), 0);
  EXPECT_NEAR(compute_bound.b(), 0.001, 0.0002);
  StepTimeModel shrinking;  // bigger steps measured faster (noise): no negative slope
  for (int i = 0; i < 40; ++i) shrinking.Record(1 + i % 8, 0, 0.010 - 0.0001 * (i % 8));
  ASSERT_TRUE(shrinking.ready());
  EXPECT_EQ(shrinking.b(), 0);
  EXPECT_GT(shrinking.Seconds(1, 0), 0);
}

TEST(StepTimeModelTest, IgnoresReportsThatAreNoTime) {
  StepTimeModel model;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 100; ++i) {
    model.Record(1 + i % 8, 0, nan);
    model.Record(1 + i % 8, 0, inf);
    model.Record(1 + i % 8, 0, 0);
    model.Record(1 + i % 8, 0, -1);
    model.Record(0, 0, 1);
    model.Record(-3, 0, 1);
    model.Record(1 + i % 8, -1, 1);
    model.Record(1 + i % 8, nan, 1);
    model.Record(1 + i % 8, inf, 1);
  }
  EXPECT_FALSE(model.ready());
  for (int i = 0; i < 40; ++i) model.Record(1 + i % 8, 0, 0.001 * (2 + i % 8));
  ASSERT_TRUE(model.ready());
  EXPECT_TRUE(std::isfinite(model.a()) && std::isfinite(model.b()));
  EXPECT_NEAR(model.a(), 0.001, 1e-9);
}

}  // namespace
}  // namespace pagoda
