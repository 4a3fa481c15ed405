// StageMailbox (issue 40): the receiving end of a stage's link. A step takes the activations
// put for its id, in any order of arrival, waiting for them if need be; it gets an error, never
// the wrong data, when they do not come, do not fit, the mailbox closes or its wait is
// interrupted; and what no step takes is bounded.
#include "worker/stage_mailbox.h"

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(StageMailboxTest, AStepTakesItsOwnActivationsWhenTheyArrive) {
  StageMailbox box;
  box.Put(2, {2.0f, 2.5f});
  box.Put(1, {1.0f, 1.5f});
  std::vector<float> out(2);
  ASSERT_TRUE(box.Take(1, out, absl::Seconds(1)).ok());
  EXPECT_THAT(out, ElementsAre(1.0f, 1.5f));
  ASSERT_TRUE(box.Take(2, out, absl::Seconds(1)).ok());
  EXPECT_THAT(out, ElementsAre(2.0f, 2.5f));
  EXPECT_EQ(box.num_pending(), 0);

  // Taken before it is put: the step waits for it.
  std::thread sender([&box] { box.Put(3, {3.0f, 3.5f}); });
  EXPECT_TRUE(box.Take(3, out, absl::Seconds(30)).ok());
  sender.join();
  EXPECT_THAT(out, ElementsAre(3.0f, 3.5f));
}

TEST(StageMailboxTest, MissingMisfitOrClosedIsAnError) {
  StageMailbox box(/*max_pending=*/2);
  std::vector<float> out(2);
  absl::Status s = box.Take(9, out, absl::Milliseconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("step 9: the previous stage's activations did not arrive"));

  box.Put(4, {1.0f, 2.0f, 3.0f});
  s = box.Take(4, out, absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sent 3 activations, not 2"));

  // Bounded: the oldest goes.
  box.Put(5, {5, 5});
  box.Put(6, {6, 6});
  box.Put(7, {7, 7});
  EXPECT_EQ(box.num_pending(), 2);
  EXPECT_EQ(box.Take(5, out, absl::Milliseconds(10)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(box.Take(7, out, absl::Seconds(1)).ok());

  std::thread closer([&box] { box.Close(); });
  EXPECT_EQ(box.Take(8, out, absl::Seconds(30)).code(), absl::StatusCode::kCancelled);
  closer.join();
  box.Put(8, {8, 8});  // ignored once closed
  EXPECT_EQ(box.num_pending(), 0);
}

// The router's call ended mid-step: the step waiting for activations gives up at once (not at
// its timeout); the steps after wait as usual.
TEST(StageMailboxTest, AnInterruptEndsTheWaitingTakeOnly) {
  StageMailbox box;
  std::vector<float> out(2);
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    while (!done.load()) {
      box.Interrupt();
      std::this_thread::yield();
    }
  });
  const absl::Status s = box.Take(8, out, absl::Seconds(60));
  done = true;
  interrupter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("step 8: abandoned while waiting for the previous stage"));
  box.Put(9, {9, 9});
  EXPECT_TRUE(box.Take(9, out, absl::Seconds(1)).ok());
  EXPECT_THAT(out, ElementsAre(9, 9));
}

}  // namespace
}  // namespace pagoda
