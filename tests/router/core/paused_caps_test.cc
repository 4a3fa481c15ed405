#include "router/core/paused_caps.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

MATCHER_P2(Cancels, id, cap, "") { return arg.request_id == id && arg.cap == cap; }

const absl::Time kCapsT0 = absl::FromUnixSeconds(1000);

PausedRequest Paused(int64_t id, int seconds_ago, int n, const RequestPeer* peer) {
  return {.request_id = id,
          .paused_since = kCapsT0 - absl::Seconds(seconds_ago),
          .num_sequences = n,
          .peer = peer};
}

TEST(PausedCapsTest, NoCapCancelsNothing) {
  const RequestPeer a{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  EXPECT_THAT(OverPausedCaps({Paused(1, 5, 16, &a), Paused(2, 4, 16, &a)}, PausedCaps{}),
              IsEmpty());
}

TEST(PausedCapsTest, TheRoutersCapCountsEveryClientsPausedSequences) {
  const RequestPeer a{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  const RequestPeer b{"ipv4:10.0.0.2", "ipv4:10.0.0.2:1"};
  const RequestPeer c{"ipv4:10.0.0.3", "ipv4:10.0.0.3:1"};
  // Each client is within its own caps; together they pass the router's 40: the oldest goes.
  EXPECT_THAT(OverPausedCaps({Paused(1, 3, 16, &a), Paused(2, 9, 16, &b), Paused(3, 5, 16, &c)},
                             {.max_per_connection = 32, .max_per_client = 32, .max_total = 40}),
              ElementsAre(Cancels(2, PausedCap::kRouter)));
}

TEST(PausedCapsTest, TheOldestPausedOfAConnectionGoFirst) {
  const RequestPeer a{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  const RequestPeer b{"ipv4:10.0.0.2", "ipv4:10.0.0.2:1"};
  // Connection a: 3 x 16 paused against a cap of 32; b's own 16 are within its cap.
  EXPECT_THAT(OverPausedCaps({Paused(1, 1, 16, &a), Paused(2, 9, 16, &a), Paused(3, 5, 16, &a),
                              Paused(4, 20, 16, &b)},
                             {.max_per_connection = 32}),
              ElementsAre(Cancels(2, PausedCap::kConnection)));
}

TEST(PausedCapsTest, EqualPauseTimesCancelTheLowerIdFirst) {
  const RequestPeer a{"c", "c:1"};
  EXPECT_THAT(OverPausedCaps({Paused(7, 0, 4, &a), Paused(8, 0, 4, &a)}, {.max_per_connection = 4}),
              ElementsAre(Cancels(7, PausedCap::kConnection)));
}

TEST(PausedCapsTest, AClientsCapCountsAllItsConnections) {
  const RequestPeer a1{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  const RequestPeer a2{"ipv4:10.0.0.1", "ipv4:10.0.0.1:2"};
  EXPECT_THAT(OverPausedCaps({Paused(1, 3, 8, &a1), Paused(2, 2, 8, &a2), Paused(3, 1, 8, &a1)},
                             {.max_per_connection = 16, .max_per_client = 16}),
              ElementsAre(Cancels(1, PausedCap::kClient)));
}

TEST(PausedCapsTest, ACancelledRequestLeavesRoomForAnOlderSmallerOne) {
  const RequestPeer a{"c", "c:1"};
  // Newest first: 8 fits, 16 would pass 20 (cancelled, not counted), then the oldest 8 fits.
  EXPECT_THAT(OverPausedCaps({Paused(1, 3, 8, &a), Paused(2, 2, 16, &a), Paused(3, 1, 8, &a)},
                             {.max_per_connection = 20}),
              ElementsAre(Cancels(2, PausedCap::kConnection)));
}

TEST(PausedCapsTest, UnnamedPeersAreNotCounted) {
  const RequestPeer none;
  EXPECT_THAT(OverPausedCaps({Paused(1, 2, 16, &none), Paused(2, 1, 16, nullptr)},
                             {.max_per_connection = 16, .max_per_client = 16}),
              IsEmpty());
}

// ReviewPaused: the Tick's rule over every request it holds.
TEST(ReviewPausedTest, StartsStallClocksAndStopsThemWhenTheClientReads) {
  absl::Time since1 = absl::InfiniteFuture(), since2 = kCapsT0 - absl::Seconds(3);
  const std::vector<PauseState> states = {
      {.request_id = 1, .paused = true, .paused_since = &since1, .num_sequences = 2},
      {.request_id = 2, .paused = false, .paused_since = &since2, .num_sequences = 1}};
  const PauseReview review = ReviewPaused(states, kCapsT0, absl::Seconds(60), PausedCaps{});
  EXPECT_EQ(since1, kCapsT0);                 // paused now: its clock starts
  EXPECT_EQ(since2, absl::InfiniteFuture());  // reads again: its clock stops
  EXPECT_THAT(review.end, IsEmpty());
  EXPECT_EQ(review.num_paused, 2);
}

TEST(ReviewPausedTest, EndsAStalledRequestAndCountsItNoLongerAsPaused) {
  absl::Time stalled = kCapsT0 - absl::Seconds(60), recent = kCapsT0 - absl::Seconds(59);
  const std::vector<PauseState> states = {
      {.request_id = 7, .paused = true, .paused_since = &stalled, .num_sequences = 4},
      {.request_id = 8, .paused = true, .paused_since = &recent, .num_sequences = 1}};
  const PauseReview review = ReviewPaused(states, kCapsT0, absl::Seconds(60), PausedCaps{});
  ASSERT_EQ(review.end.size(), 1u);
  EXPECT_EQ(review.end[0].first, 7);
  EXPECT_EQ(review.end[0].second.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(review.end[0].second.message()),
              ::testing::HasSubstr("--stall-timeout-s"));
  EXPECT_EQ(review.num_stalled, 1);
  EXPECT_EQ(review.num_paused, 1);
}

TEST(ReviewPausedTest, EndsTheOldestPastACapNamingTheFlag) {
  const RequestPeer a{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  absl::Time old = kCapsT0 - absl::Seconds(5), young = kCapsT0 - absl::Seconds(1);
  const std::vector<PauseState> states = {
      {.request_id = 1, .paused = true, .paused_since = &old, .num_sequences = 2, .peer = &a},
      {.request_id = 2, .paused = true, .paused_since = &young, .num_sequences = 2, .peer = &a}};
  const PauseReview review =
      ReviewPaused(states, kCapsT0, absl::Seconds(60), PausedCaps{.max_per_connection = 3});
  ASSERT_EQ(review.end.size(), 1u);
  EXPECT_EQ(review.end[0].first, 1);  // the oldest goes; the newest is likeliest to be read
  EXPECT_EQ(review.end[0].second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(review.end[0].second.message()),
              ::testing::HasSubstr("--max-paused-per-connection"));
  EXPECT_EQ(review.num_over_connection_cap, 1);
  EXPECT_EQ(review.num_over_client_cap, 0);
  EXPECT_EQ(review.num_paused, 2);
}

}  // namespace
}  // namespace pagoda
