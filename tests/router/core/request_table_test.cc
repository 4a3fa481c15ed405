#include "router/core/request_table.h"

#include <atomic>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kTableT0 = absl::FromUnixSeconds(1000);

GenerationRequest Prompt(int n) {
  GenerationRequest r;
  r.prompt_ids = {1, 2, 3};
  r.n = n;
  return r;
}

SequenceUpdate Tokens(int64_t id, int seq, std::vector<int> tokens, bool finished = false) {
  SequenceUpdate u;
  u.request_id = id;
  u.seq_index = seq;
  u.token_ids = std::move(tokens);
  u.finished = finished;
  return u;
}

// Every update a request's sink saw.
struct Seen {
  std::vector<RequestUpdate> updates;
  bool keep_going = true;
  RequestSink Sink() {
    return [this](const RequestUpdate& u) {
      updates.push_back(u);
      return keep_going;
    };
  }
};

// Delivers one update as the Cluster does; the worker to abort the sequence on, or -1.
int Deliver(RequestTable& table, int worker_id, const SequenceUpdate& u) {
  return table.Deliver(worker_id, u) == RequestTable::Delivered::kAbortSequence ? worker_id : -1;
}

QueuedRequest Work(int64_t id, const GenerationRequest& r) {
  return {.request_id = id, .request = r, .pull = std::nullopt};
}

TEST(RequestTableTest, DeliversInOrderAndErasesWhenEverySequenceFinished) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(2), seen.Sink(), absl::InfiniteFuture());
  table.Assign(Work(id, Prompt(2)), 3);
  EXPECT_EQ(table.NumHeldBy(3), 2);
  EXPECT_EQ(Deliver(table, 3, Tokens(id, 0, {7})), -1);
  EXPECT_EQ(Deliver(table, 3, Tokens(id, 1, {8}, /*finished=*/true)), -1);
  EXPECT_EQ(table.NumHeldBy(3), 1);
  EXPECT_TRUE(table.contains(id));
  Deliver(table, 3, Tokens(id, 0, {9}, /*finished=*/true));
  EXPECT_FALSE(table.contains(id));
  ASSERT_EQ(seen.updates.size(), 3u);
  EXPECT_EQ(seen.updates[0].worker_id, 3);
  EXPECT_THAT(seen.updates[2].token_ids, ElementsAre(9));
  // A late update of an erased request goes nowhere.
  EXPECT_EQ(Deliver(table, 3, Tokens(id, 0, {10})), -1);
  EXPECT_EQ(seen.updates.size(), 3u);
}

TEST(RequestTableTest, ASinkThatWantsNoMoreAbortsItsSequenceOnce) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(1), seen.Sink(), absl::InfiniteFuture());
  table.Assign(Work(id, Prompt(1)), 6);
  seen.keep_going = false;
  EXPECT_EQ(Deliver(table, 6, Tokens(id, 0, {7})), 6);   // abort it on its worker
  EXPECT_FALSE(table.contains(id));                      // its one sequence counts as finished
  EXPECT_EQ(Deliver(table, 6, Tokens(id, 0, {8})), -1);  // asked once
}

TEST(RequestTableTest, AForkWithoutTokensIsNotDelivered) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(2), seen.Sink(), absl::InfiniteFuture());
  EXPECT_EQ(Deliver(table, 0, Tokens(id, 1, {})), -1);
  EXPECT_THAT(seen.updates, IsEmpty());
}

TEST(RequestTableTest, EndTellsTheSinkTheErrorAndReturnsWhereItRan) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(1), seen.Sink(), absl::InfiniteFuture());
  table.Assign(Work(id, Prompt(1)), 2);
  const auto workers = table.End(id, absl::UnavailableError("gone"));
  ASSERT_TRUE(workers.has_value());
  EXPECT_THAT(*workers, ElementsAre(2));
  ASSERT_EQ(seen.updates.size(), 1u);
  EXPECT_EQ(seen.updates[0].error.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(seen.updates[0].finished);
  EXPECT_FALSE(table.End(id, absl::OkStatus()).has_value());
  // An abort (OK) tells the sink nothing.
  Seen quiet;
  const int64_t other = table.Add(Prompt(1), quiet.Sink(), absl::InfiniteFuture());
  EXPECT_TRUE(table.End(other, absl::OkStatus()).has_value());
  EXPECT_THAT(quiet.updates, IsEmpty());
}

TEST(RequestTableTest, RefuseAbortsTheRequest) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(1), seen.Sink(), absl::InfiniteFuture());
  table.Refuse(id);
  ASSERT_EQ(seen.updates.size(), 1u);
  EXPECT_EQ(seen.updates[0].finish_reason, FinishReason::kAbort);
  EXPECT_FALSE(table.contains(id));
}

TEST(RequestTableTest, SequencesOfALostWorkerResumeFromWhatTheyDelivered) {
  RequestTable table;
  Seen a, b;
  const int64_t moved = table.Add(Prompt(2), a.Sink(), absl::InfiniteFuture());
  const int64_t queued = table.Add(Prompt(1), b.Sink(), absl::InfiniteFuture());
  table.Assign(Work(moved, Prompt(2)), 1);
  table.Assign(Work(queued, Prompt(1)), 1);
  Deliver(table, 1, Tokens(moved, 0, {5, 6}));
  Deliver(table, 1, Tokens(moved, 1, {7}, /*finished=*/true));
  const std::vector<QueuedRequest> resumed =
      table.TakeSequencesOn(1, [&](int64_t id) { return id == queued; });
  // Only the unfinished sequence of the started request, as one sequence with its tokens.
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].request_id, moved);
  EXPECT_EQ(resumed[0].request.n, 1);
  EXPECT_EQ(resumed[0].request.first_seq_index, 0);
  EXPECT_THAT(resumed[0].request.output_ids, ElementsAre(5, 6));
  EXPECT_TRUE(resumed[0].request.front_of_queue);
  EXPECT_EQ(table.NumHeldBy(1), 1);  // the queued one stays until it is placed again
  EXPECT_THAT(table.WorkersOf(moved), ElementsAre(-1, 1));
}

TEST(RequestTableTest, ResumeIfOnOnlyForAnUnfinishedSequenceOnThatWorker) {
  RequestTable table;
  Seen seen;
  const int64_t id = table.Add(Prompt(2), seen.Sink(), absl::InfiniteFuture());
  table.Assign(Work(id, Prompt(2)), 4);
  Deliver(table, 4, Tokens(id, 1, {9}, /*finished=*/true));
  EXPECT_TRUE(table.ResumeIfOn(id, 0, 4).has_value());
  EXPECT_FALSE(table.ResumeIfOn(id, 1, 4).has_value());  // finished
  EXPECT_FALSE(table.ResumeIfOn(id, 0, 5).has_value());  // elsewhere
  EXPECT_FALSE(table.ResumeIfOn(id, 2, 4).has_value());  // no such sequence
  EXPECT_FALSE(table.ResumeIfOn(id + 1, 0, 4).has_value());
}

TEST(RequestTableTest, ExpiredAndPausedAtATick) {
  RequestTable table;
  Seen a, b, c;
  const int64_t early = table.Add(Prompt(1), a.Sink(), kTableT0 - absl::Seconds(1));
  const int64_t late = table.Add(Prompt(1), b.Sink(), kTableT0 + absl::Seconds(1));
  GenerationRequest paused_request = Prompt(1);
  auto paused = std::make_shared<std::atomic<bool>>(true);
  paused_request.paused = paused;
  const int64_t reader = table.Add(paused_request, c.Sink(), absl::InfiniteFuture());
  EXPECT_THAT(table.Expired({early, late, 999}, kTableT0), ElementsAre(early));
  // Paused at the first review; stalled once the timeout passed at every review since.
  PauseReview first = table.ReviewPaused(kTableT0, absl::Seconds(10), PausedCaps{}, {early});
  EXPECT_EQ(first.num_paused, 1);
  EXPECT_THAT(first.end, IsEmpty());
  PauseReview later =
      table.ReviewPaused(kTableT0 + absl::Seconds(11), absl::Seconds(10), PausedCaps{}, {early});
  ASSERT_EQ(later.end.size(), 1u);
  EXPECT_EQ(later.end[0].first, reader);
  EXPECT_EQ(later.end[0].second.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace pagoda
