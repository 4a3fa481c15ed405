#include "router/core/paused_caps.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

MATCHER_P2(Cancels, id, cap, "") { return arg.request_id == id && arg.cap == cap; }

const absl::Time kT0 = absl::FromUnixSeconds(1000);

PausedRequest Paused(int64_t id, int seconds_ago, int n, const RequestPeer* peer) {
  return {.request_id = id,
          .paused_since = kT0 - absl::Seconds(seconds_ago),
          .num_sequences = n,
          .peer = peer};
}

TEST(PausedCapsTest, NoCapCancelsNothing) {
  const RequestPeer a{"ipv4:10.0.0.1", "ipv4:10.0.0.1:1"};
  EXPECT_THAT(OverPausedCaps({Paused(1, 5, 16, &a), Paused(2, 4, 16, &a)}, PausedCaps{}),
              IsEmpty());
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

}  // namespace
}  // namespace pagoda
