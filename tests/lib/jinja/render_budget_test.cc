// RenderBudget: what a render has spent against its RenderLimits, and the depth it has reached.
#include "lib/jinja/render_budget.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;

RenderLimits SmallLimits() {
  RenderLimits limits;
  limits.max_output_bytes = 8;
  limits.max_steps = 10;
  limits.max_copied_bytes = 100;
  limits.max_call_depth = 2;
  return limits;
}

TEST(RenderBudgetTest, StepsAddUpToTheLimitAndOneMoreIsResourceExhausted) {
  RenderBudget budget(SmallLimits());
  EXPECT_TRUE(budget.Charge(4).ok());
  EXPECT_TRUE(budget.Charge(6).ok());
  EXPECT_EQ(budget.steps(), 10);
  const absl::Status over = budget.Charge(1);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("limit of 10 steps"));
}

TEST(RenderBudgetTest, OnceOverTheLimitEveryLaterChargeFails) {
  RenderBudget budget(SmallLimits());
  EXPECT_FALSE(budget.Charge(11).ok());
  EXPECT_EQ(budget.Charge(0).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(budget.ChargeBytes(101).ok());
  EXPECT_EQ(budget.ChargeBytes(0).code(), absl::StatusCode::kResourceExhausted);
}

TEST(RenderBudgetTest, CopiedBytesAreCountedApartFromSteps) {
  RenderBudget budget(SmallLimits());
  EXPECT_TRUE(budget.ChargeBytes(100).ok());
  EXPECT_EQ(budget.copied_bytes(), 100);
  EXPECT_EQ(budget.steps(), 0);
  const absl::Status over = budget.ChargeBytes(1);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("limit of 100 bytes copied into strings"));
  EXPECT_TRUE(budget.Charge(10).ok());
}

TEST(RenderBudgetTest, CheckSizeBoundsOneValueAndSpendsNothing) {
  RenderBudget budget(SmallLimits());
  EXPECT_TRUE(budget.CheckSize(8).ok());
  const absl::Status over = budget.CheckSize(9);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(), "template built a value of 9 bytes, over the limit of 8");
  EXPECT_TRUE(budget.CheckSize(8).ok());
  EXPECT_EQ(budget.steps(), 0);
  EXPECT_EQ(budget.copied_bytes(), 0);
}

TEST(RenderBudgetTest, DepthGuardsNestAndReleaseOnScopeExit) {
  RenderBudget budget(SmallLimits());
  {
    RenderBudget::DepthGuard outer(budget);
    EXPECT_EQ(budget.depth(), 1);
    {
      RenderBudget::DepthGuard second(budget);
      EXPECT_TRUE(budget.CheckDepth(3, "template nests or recurses").ok());
      RenderBudget::DepthGuard third(budget);
      EXPECT_EQ(budget.depth(), 3);
      const absl::Status deep = budget.CheckDepth(7, "macro calls nest");
      EXPECT_EQ(deep.code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(deep.message(), "line 7: macro calls nest deeper than 2");
    }
    EXPECT_EQ(budget.depth(), 1);
    EXPECT_TRUE(budget.CheckDepth(1, "template nests or recurses").ok());
  }
  EXPECT_EQ(budget.depth(), 0);
}

}  // namespace
}  // namespace pagoda::jinja
