// The bounds on request bodies in flight: large sized bodies share bytes, chunked ones slots,
// small ones pass free; what is released is admitted again. Thread-free.
#include "common/process/body_budget.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

HttpHead Sized(uint64_t bytes) {
  HttpHead head;
  head.body = HttpHead::Body::kSized;
  head.content_length = bytes;
  return head;
}

HttpHead Chunked() {
  HttpHead head;
  head.body = HttpHead::Body::kChunked;
  return head;
}

TEST(BodyBudgetTest, SmallAndAbsentBodiesTakeNoShare) {
  BodyBudget budget(/*max_bytes=*/0, /*max_chunked=*/0);
  BodyBudget::Share share;
  EXPECT_EQ(budget.Admit(Sized(kSmallBodyBytes), &share), nullptr);
  EXPECT_EQ(share.bytes, 0u);
  EXPECT_EQ(budget.Admit(HttpHead(), &share), nullptr);
  EXPECT_EQ(budget.bytes_in_flight(), 0u);
  // Over the small size, a budget of nothing admits nothing.
  EXPECT_STREQ(budget.Admit(Sized(kSmallBodyBytes + 1), &share),
               "too many large request bodies at once; retry later");
  EXPECT_EQ(share.bytes, 0u);
}

TEST(BodyBudgetTest, LargeBodiesShareTheBytesUntilReleased) {
  const uint64_t large = 1 << 20;
  BodyBudget budget(/*max_bytes=*/3 * large, /*max_chunked=*/1);
  BodyBudget::Share a, b, c;
  EXPECT_EQ(budget.Admit(Sized(2 * large), &a), nullptr);
  EXPECT_EQ(a.bytes, 2 * large);
  EXPECT_EQ(budget.Admit(Sized(large), &b), nullptr);
  EXPECT_EQ(budget.bytes_in_flight(), 3 * large);
  EXPECT_NE(budget.Admit(Sized(kSmallBodyBytes + 1), &c), nullptr) << "the budget is spent";
  EXPECT_EQ(c.bytes, 0u);
  budget.Release(&a);
  EXPECT_EQ(a.bytes, 0u);
  EXPECT_EQ(budget.bytes_in_flight(), large);
  budget.Release(&a);  // twice: nothing more
  EXPECT_EQ(budget.bytes_in_flight(), large);
  EXPECT_EQ(budget.Admit(Sized(2 * large), &c), nullptr);
  budget.Release(&b);
  budget.Release(&c);
  EXPECT_EQ(budget.bytes_in_flight(), 0u);
}

TEST(BodyBudgetTest, ChunkedBodiesHoldASlotEach) {
  BodyBudget budget(/*max_bytes=*/0, /*max_chunked=*/2);
  BodyBudget::Share a, b, c;
  EXPECT_EQ(budget.Admit(Chunked(), &a), nullptr);
  EXPECT_EQ(budget.Admit(Chunked(), &b), nullptr);
  EXPECT_TRUE(a.chunked_slot && b.chunked_slot);
  EXPECT_EQ(budget.chunked_in_flight(), 2);
  EXPECT_STREQ(budget.Admit(Chunked(), &c),
               "too many chunked request bodies at once; send Content-Length");
  EXPECT_FALSE(c.chunked_slot);
  budget.Release(&a);
  EXPECT_FALSE(a.chunked_slot);
  EXPECT_EQ(budget.chunked_in_flight(), 1);
  EXPECT_EQ(budget.Admit(Chunked(), &c), nullptr);
  budget.Release(&b);
  budget.Release(&c);
  budget.Release(&c);
  EXPECT_EQ(budget.chunked_in_flight(), 0);
}

}  // namespace
}  // namespace pagoda
