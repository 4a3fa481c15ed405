#include "router/core/ordered_sink.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;

// Updates delivered by three threads in the reverse of their turns reach the sink in turn.
TEST(OrderedSinkTest, UpdatesReachTheSinkInTheOrderOfTheirTicketsWhoeverDeliversThem) {
  absl::Mutex mu;
  std::vector<int> seen;
  OrderedSink sink([&](const RequestUpdate& u) {
    absl::MutexLock lock(&mu);
    seen.push_back(u.seq_index);
    return u.seq_index != 1;
  });
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 3; ++i) tickets.push_back(sink.Ticket());
  EXPECT_THAT(tickets, ElementsAre(0, 1, 2));
  auto update = [](int index) {
    RequestUpdate u;
    u.seq_index = index;
    return u;
  };
  bool go_on[3] = {};
  std::thread last([&] { go_on[2] = sink.Deliver(tickets[2], update(2)); });
  std::thread middle([&] { go_on[1] = sink.Deliver(tickets[1], update(1)); });
  go_on[0] = sink.Deliver(tickets[0], update(0));
  last.join();
  middle.join();
  EXPECT_THAT(seen, ElementsAre(0, 1, 2));
  EXPECT_TRUE(go_on[0]);
  EXPECT_FALSE(go_on[1]);  // each caller gets its own update's answer
  EXPECT_TRUE(go_on[2]);
}

}  // namespace
}  // namespace pagoda
