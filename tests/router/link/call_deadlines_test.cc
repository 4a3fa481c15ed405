// CallDeadlines: one thread cancels the calls that stop beating, once each, and never a call
// removed.
#include "router/link/call_deadlines.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

TEST(CallDeadlinesTest, CancelsASilentCallOnceAndABeatingOneNever) {
  CallDeadlines deadlines(absl::Milliseconds(5));
  std::atomic<int> silent_cancels{0}, beating_cancels{0};
  std::shared_ptr<CallDeadlines::Deadline> silent =
      deadlines.Add([&] { ++silent_cancels; }, absl::Milliseconds(30));
  std::shared_ptr<CallDeadlines::Deadline> beating =
      deadlines.Add([&] { ++beating_cancels; }, absl::Milliseconds(200));
  // The beating call hears something well within its 200 ms until the silent one is cancelled,
  // and for a while after (the silent call must not be cancelled twice meanwhile).
  const absl::Time start = absl::Now();
  while (absl::Now() - start < absl::Milliseconds(400) || silent_cancels.load() == 0) {
    beating->Beat(absl::Milliseconds(200));
    absl::SleepFor(absl::Milliseconds(5));
    ASSERT_LT(absl::Now() - start, absl::Seconds(30)) << "the silent call was never cancelled";
  }
  EXPECT_EQ(silent_cancels.load(), 1);
  EXPECT_TRUE(silent->fired());
  EXPECT_EQ(beating_cancels.load(), 0);
  EXPECT_FALSE(beating->fired());
  // Silent from now on: it goes too.
  ASSERT_TRUE(testing::WaitUntil([&] { return beating_cancels.load() == 1; },
                                 std::chrono::seconds(30), "the beating call goes silent"));
}

TEST(CallDeadlinesTest, ARemovedCallIsNeverCancelled) {
  CallDeadlines deadlines(absl::Milliseconds(5));
  std::atomic<int> cancels{0};
  std::shared_ptr<CallDeadlines::Deadline> removed =
      deadlines.Add([&] { ++cancels; }, absl::Milliseconds(20));
  deadlines.Remove(removed.get());
  // A call added later, with the same timeout, shows the thread has passed that deadline.
  absl::Notification later;
  std::shared_ptr<CallDeadlines::Deadline> witness =
      deadlines.Add([&] { later.Notify(); }, absl::Milliseconds(20));
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(cancels.load(), 0);
  deadlines.Remove(witness.get());
}

}  // namespace
}  // namespace pagoda
