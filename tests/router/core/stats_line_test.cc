#include "router/core/stats_line.h"

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

const absl::Time kStatsT0 = absl::FromUnixSeconds(1000);

ClusterStats Stats(int64_t steps, double step_seconds, double forward_seconds) {
  ClusterStats stats;
  stats.num_blocks = 100;
  stats.num_used_blocks = 25;
  stats.num_running = 3;
  stats.num_waiting = 1;
  stats.num_steps = steps;
  stats.step_seconds = step_seconds;
  stats.forward_seconds = forward_seconds;
  return stats;
}

class StatsLineTest : public ::testing::Test {
 protected:
  MetricsRegistry registry_;
  RouterMetrics metrics_{&registry_};
  StatsLine line_{&metrics_, kStatsT0};
};

TEST_F(StatsLineTest, RatesAreOverTheIntervalSinceTheLastLine) {
  metrics_.prompt_tokens->Add(1000);
  metrics_.generation_tokens->Add(200);
  metrics_.prefix_cache_queries->Add(1000);
  metrics_.prefix_cache_hits->Add(250);
  EXPECT_THAT(line_.Next(Stats(100, 2.0, 1.5), kStatsT0 + absl::Seconds(10)),
              Optional(AllOf(HasSubstr("prompt 100.0 tok/s, generation 20.0 tok/s"),
                             HasSubstr("running 3, waiting 1, KV usage 25.0%"),
                             HasSubstr("prefix hit rate 25.0%"),
                             HasSubstr("steps 100, step 20.00 ms (forward 15.00, outside 5.00)"),
                             Not(HasSubstr("drafts")), Not(HasSubstr("KV pulled")))));
  // The next interval counts only what came after the first line.
  metrics_.generation_tokens->Add(50);
  EXPECT_THAT(line_.Next(Stats(150, 3.0, 2.0), kStatsT0 + absl::Seconds(20)),
              Optional(AllOf(HasSubstr("prompt 0.0 tok/s, generation 5.0 tok/s"),
                             HasSubstr("steps 50, step 20.00 ms (forward 10.00, outside 10.00)"))));
}

TEST_F(StatsLineTest, NoLineBeforeTheIntervalEndsOrWhenNoStepRan) {
  EXPECT_EQ(line_.Next(Stats(10, 1, 1), kStatsT0 + absl::Seconds(4)), std::nullopt);
  EXPECT_EQ(line_.Next(Stats(0, 0, 0), kStatsT0 + absl::Seconds(60)), std::nullopt);
  // The interval went on: the line covers all of it.
  EXPECT_THAT(line_.Next(Stats(10, 1, 1), kStatsT0 + absl::Seconds(80)),
              Optional(HasSubstr("steps 10,")));
}

TEST_F(StatsLineTest, DraftsAndTransfersAppearWhenThereWereSome) {
  metrics_.spec_drafts->Add(10);
  metrics_.spec_draft_tokens->Add(40);
  metrics_.spec_accepted_tokens->Add(30);
  metrics_.kv_transfer_blocks->Add(8);
  metrics_.kv_transfer_bytes->Add(4e6);
  metrics_.kv_transfer_saved_tokens->Add(128);
  EXPECT_THAT(
      line_.Next(Stats(10, 1, 1), kStatsT0 + absl::Seconds(6)),
      Optional(AllOf(HasSubstr("drafts: 75.0% of 40 tokens accepted, 4.00 tokens per draft step"),
                     HasSubstr("KV pulled: 8 blocks (4.0 MB), 128 tokens spared, 0 failed"))));
}

}  // namespace
}  // namespace pagoda
