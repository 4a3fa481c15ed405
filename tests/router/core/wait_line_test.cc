#include "router/core/wait_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pagoda {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

TEST(WaitLineTest, QuietWhileServing) {
  WaitLine line(absl::Seconds(10));
  WaitLine::State serving{.serving = true, .num_workers = 2};
  for (int s = 0; s <= 60; s += 5) {
    EXPECT_EQ(line.Next(serving, kStart + absl::Seconds(s)), std::nullopt) << s;
  }
}

TEST(WaitLineTest, WaitingForAWorkerSaysWhoIsLoadingAndHowLong) {
  WaitLine line(absl::Seconds(10));
  WaitLine::State state{.worker_port = 50052,
                        .loading = {"h:12 loading weights: 1.2 / 2.2 GB (54%)"}};
  EXPECT_EQ(line.Next(state, kStart), std::nullopt);  // a wait starts quiet
  EXPECT_EQ(line.Next(state, kStart + absl::Seconds(9)), std::nullopt);
  std::optional<std::string> said = line.Next(state, kStart + absl::Seconds(10));
  ASSERT_TRUE(said.has_value());
  EXPECT_EQ(*said,
            "not serving yet (10 s): waiting for a worker; loading: h:12 loading weights: 1.2 / "
            "2.2 GB (54%)");
  EXPECT_EQ(line.Next(state, kStart + absl::Seconds(15)), std::nullopt);  // once an interval
  EXPECT_THAT(line.Next(state, kStart + absl::Seconds(20)).value_or(""), HasSubstr("(20 s)"));
  // Serving ends the wait; the next wait counts from its own start.
  EXPECT_EQ(line.Next({.serving = true, .num_workers = 1}, kStart + absl::Seconds(25)),
            std::nullopt);
  EXPECT_EQ(line.Next(state, kStart + absl::Seconds(30)), std::nullopt);
  EXPECT_THAT(line.Next(state, kStart + absl::Seconds(40)).value_or(""), HasSubstr("(10 s)"));
}

TEST(WaitLineTest, WithNobodyLoadingItSaysWhatWouldEndTheWait) {
  WaitLine spawned(absl::Seconds(10)), alone(absl::Seconds(10));
  spawned.Next({.num_spawned = 2}, kStart);
  EXPECT_THAT(spawned.Next({.num_spawned = 2}, kStart + absl::Seconds(10)).value_or(""),
              HasSubstr("waiting for 2 spawned worker(s) to load the model and connect"));
  alone.Next({.worker_port = 50052}, kStart);
  EXPECT_THAT(alone.Next({.worker_port = 50052}, kStart + absl::Seconds(10)).value_or(""),
              HasSubstr("no worker has connected to the worker port 50052 (start one: "
                        "pagoda-worker --router=THIS_HOST:50052 --model=...)"));
}

TEST(WaitLineTest, DrainsSayWhatIsLeftOnEachWorker) {
  WaitLine line(absl::Seconds(10));
  WaitLine::State state{.serving = true, .num_workers = 3, .draining = {{1, 5}, {2, 0}}};
  EXPECT_EQ(line.Next(state, kStart), std::nullopt);
  EXPECT_EQ(line.Next(state, kStart + absl::Seconds(12)),
            "draining (12 s): worker 1 has 5 sequences left, worker 2 has 0 sequences left");
  // Every worker draining: not serving either.
  WaitLine all(absl::Seconds(10));
  WaitLine::State every{.num_workers = 1, .draining = {{0, 3}}};
  all.Next(every, kStart);
  EXPECT_EQ(all.Next(every, kStart + absl::Seconds(10)),
            "not serving yet (10 s): every connected worker is draining; draining (10 s): worker "
            "0 has 3 sequences left");
}

TEST(WaitLineTest, AShutdownSaysHowManySequencesItWaitsFor) {
  WaitLine line(absl::Seconds(5));
  WaitLine::State state{.shutting_down = true, .num_workers = 1, .num_running = 4};
  line.Next(state, kStart);
  EXPECT_EQ(line.Next(state, kStart + absl::Seconds(5)),
            "shutting down (5 s): waiting for 4 running sequences to finish");
}

}  // namespace
}  // namespace pagoda
