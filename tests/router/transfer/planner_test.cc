#include "router/transfer/planner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/block_pool.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Kind = TransferAction::Kind;

constexpr int kBlockSize = 16;

ModelConfig Config() {
  ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  return c;
}

// Three workers that can all move K/V between them, idle, and a planner over them.
class TransferPlannerTest : public ::testing::Test {
 protected:
  TransferPlannerTest() : planner_(Config(), {.min_tokens = 32}, &placement_) {
    for (int i = 0; i < 3; ++i) {
      WorkerInfo& info = infos_.emplace_back();
      info.num_blocks = 100;
      info.block_size = kBlockSize;
      info.kv_cache_dtype = "bf16";
      info.kv_transfer_address = "peer" + std::to_string(i);
      views_.push_back({.id = i, .alive = true});
    }
  }

  TransferSnapshot Snapshot() {
    TransferSnapshot s;
    s.now = now_;
    s.workers = views_;
    for (size_t i = 0; i < views_.size(); ++i) s.workers[i].info = &infos_[i];
    return s;
  }

  // A request whose prompt is `num_blocks` full blocks (tokens from `first`) and one token more.
  static QueuedRequest Work(int64_t id, int num_blocks, int first = 1) {
    QueuedRequest work;
    work.request_id = id;
    for (int i = 0; i < num_blocks * kBlockSize + 1; ++i)
      work.request.prompt_ids.push_back(first + i);
    HashPrompt(&work.request, kBlockSize);
    return work;
  }

  // Placement's hints that worker `owner` was sent work's prompt.
  std::vector<Placement::OwnerList> SentTo(const QueuedRequest& work, int owner) {
    placement_.Remember(work.request.prompt_block_hashes, owner);
    return placement_.Owners(work.request.prompt_block_hashes);
  }

  // Starts a pull of `work` into `chosen` from the owner of its prompt, `src`.
  TransferActions Start(QueuedRequest work, int src, int chosen) {
    const std::vector<Placement::OwnerList> owners = SentTo(work, src);
    TransferActions out;
    EXPECT_TRUE(planner_.StartPull(Snapshot(), chosen, owners, &work, &out));
    return out;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::vector<WorkerInfo> infos_;
  std::vector<WorkerView> views_;
  Placement placement_{PlacementOptions{}};
  TransferPlanner planner_;
};

TEST_F(TransferPlannerTest, ARequestAsksTheWorkerThatHasItsPrefixToHoldIt) {
  const QueuedRequest work = Work(7, 4);
  const TransferActions out = Start(work, /*src=*/1, /*chosen=*/0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kHold);
  EXPECT_EQ(out[0].worker, 1);
  EXPECT_EQ(out[0].hold.block_hashes, work.request.prompt_block_hashes);
  EXPECT_EQ(out[0].hold.tokens.size(), 4u * kBlockSize);
  EXPECT_EQ(planner_.NumWaiting(0), 1) << "it waits, counted as its destination's";
  EXPECT_EQ(planner_.NumWaiting(1), 0);
  // Until the pull ends, only the source has the blocks.
  EXPECT_THAT(placement_.Owners(work.request.prompt_block_hashes)[3], ElementsAre(1));
}

TEST_F(TransferPlannerTest, NeverPullsTheBlockHoldingTheLastToken) {
  QueuedRequest work = Work(7, 4);
  work.request.prompt_ids.pop_back();  // exactly 4 blocks: the 4th holds the last token
  const TransferActions out = Start(work, 1, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hold.block_hashes.size(), 3u);
}

TEST_F(TransferPlannerTest, NoPullWhenItSparesTooFewTokensOrNoPeerCanSendIt) {
  TransferActions out;
  QueuedRequest one_block = Work(1, 1);  // 16 tokens < min_tokens
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, SentTo(one_block, 1), &one_block, &out));
  QueuedRequest unknown = Work(2, 4);
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, {}, &unknown, &out)) << "no hints";

  QueuedRequest work = Work(3, 4);
  const std::vector<Placement::OwnerList> owners = SentTo(work, 1);
  infos_[1].kv_cache_dtype = "f32";
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, owners, &work, &out)) << "another dtype";
  infos_[1].kv_cache_dtype = "bf16";
  infos_[1].kv_transfer_address = "";
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, owners, &work, &out)) << "no address";
  infos_[1].kv_transfer_address = "peer1";
  views_[1].alive = false;
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, owners, &work, &out)) << "dead";
  views_[1].alive = true;
  // Computing it is faster than moving it: 1 ns a token.
  views_[0].load.num_prefill_tokens = 1000;
  views_[0].load.prefill_forward_seconds = 1e-6;
  EXPECT_FALSE(planner_.StartPull(Snapshot(), 0, owners, &work, &out)) << "computing pays";
  EXPECT_THAT(out, IsEmpty());
  EXPECT_EQ(planner_.num_transfers(), 0);
}

TEST_F(TransferPlannerTest, HeldBlocksQueueTheRequestWithAPullAndItsFollowersAfterIt) {
  const TransferActions hold = Start(Work(7, 4), 1, 0);
  // The same prefix for the same destination waits for that transfer.
  QueuedRequest follower = Work(8, 4);
  TransferActions none;
  ASSERT_TRUE(planner_.StartPull(
      Snapshot(), 0, placement_.Owners(follower.request.prompt_block_hashes), &follower, &none));
  EXPECT_THAT(none, IsEmpty());
  EXPECT_EQ(planner_.NumWaiting(0), 2);

  TransferEvents held;
  held.held.push_back({.transfer_id = hold[0].hold.transfer_id, .blocks = {10, 11, 12, 13}});
  const TransferActions queued = planner_.OnEvents(Snapshot(), 1, held);
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].kind, Kind::kQueue);
  EXPECT_EQ(queued[0].worker, 0);
  ASSERT_TRUE(queued[0].work->pull.has_value());
  const PullPlan& plan = *queued[0].work->pull;
  EXPECT_EQ(plan.peer_address, "peer1");
  EXPECT_THAT(plan.src_blocks, ElementsAre(10, 11, 12, 13));
  EXPECT_EQ(plan.tokens.size(), 4u * kBlockSize);
  EXPECT_EQ(plan.tail_tokens, 0);

  TransferEvents pulled;
  TransferEvents::Pulled& p = pulled.pulled.emplace_back();
  p.transfer_id = plan.transfer_id;
  p.started = true;
  p.ok = true;
  p.num_blocks = 4;
  p.bytes = 1 << 20;
  p.seconds = 0.5;
  const TransferActions done = planner_.OnEvents(Snapshot(), 0, pulled);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].kind, Kind::kRelease);
  EXPECT_EQ(done[0].worker, 1);
  EXPECT_THAT(done[0].blocks, ElementsAre(10, 11, 12, 13));
  EXPECT_EQ(done[1].kind, Kind::kQueue);
  EXPECT_EQ(done[1].work->request_id, 8);
  EXPECT_FALSE(done[1].work->pull.has_value()) << "the blocks are cached there now";
  EXPECT_EQ(planner_.num_transfers(), 0);
  EXPECT_EQ(placement_.Owners(Work(8, 4).request.prompt_block_hashes)[3][0], 0)
      << "the destination has the blocks now";
  EXPECT_NE(planner_.cost().PullSeconds(1 << 20), TransferCost().PullSeconds(1 << 20))
      << "the pull was measured";
}

TEST_F(TransferPlannerTest, AHolderWithNothingCachedLetsTheRequestComputeItsPrefix) {
  const TransferActions hold = Start(Work(7, 4), 1, 0);
  TransferEvents held;
  held.held.push_back({.transfer_id = hold[0].hold.transfer_id, .blocks = {}});
  const TransferActions out = planner_.OnEvents(Snapshot(), 1, held);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kQueue);
  EXPECT_EQ(out[0].worker, 0);
  EXPECT_FALSE(out[0].work->pull.has_value());
  EXPECT_EQ(placement_.Owners(Work(7, 4).request.prompt_block_hashes)[0][0], 0)
      << "it computes them";
}

TEST_F(TransferPlannerTest, BlocksHeldForAnEndedRequestAreReleasedAndItsFollowersGoOn) {
  const TransferActions hold = Start(Work(7, 4), 1, 0);
  QueuedRequest follower = Work(8, 4);
  TransferActions none;
  ASSERT_TRUE(planner_.StartPull(
      Snapshot(), 0, placement_.Owners(follower.request.prompt_block_hashes), &follower, &none));
  const TransferActions ended = planner_.EndRequest(7);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].kind, Kind::kQueue);
  EXPECT_EQ(ended[0].work->request_id, 8);
  EXPECT_EQ(ended[0].worker, 0);

  TransferEvents held;
  held.held.push_back({.transfer_id = hold[0].hold.transfer_id, .blocks = {10, 11}});
  const TransferActions out = planner_.OnEvents(Snapshot(), 1, held);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kRelease);
  EXPECT_THAT(out[0].blocks, ElementsAre(10, 11));
}

TEST_F(TransferPlannerTest, AHoldingRequestGivesUpAfterAFewPrefillsOfWaiting) {
  // Worker 0 computes a prompt token in 1 ms: 4 blocks take 64 ms, waited for at most 3x.
  views_[0].load.num_prefill_tokens = 1000;
  views_[0].load.prefill_forward_seconds = 1.0;
  Start(Work(7, 4), 1, 0);
  EXPECT_THAT(planner_.GiveUpWaiting(now_ + absl::Milliseconds(191)), IsEmpty());
  const TransferActions out = planner_.GiveUpWaiting(now_ + absl::Milliseconds(193));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kQueue);
  EXPECT_EQ(out[0].worker, 0);
  EXPECT_EQ(planner_.NumWaiting(-1), 0);
}

TEST_F(TransferPlannerTest, AWorkerThatLeavesEndsItsTransfers) {
  Start(Work(7, 4), 1, 0);  // holding on worker 1
  const TransferActions hold = Start(Work(8, 4, 500), 2, 0);
  TransferEvents held;
  held.held.push_back({.transfer_id = hold[0].hold.transfer_id, .blocks = {20, 21, 22, 23}});
  planner_.OnEvents(Snapshot(), 2, held);  // pulling from worker 2 into worker 0
  ASSERT_EQ(planner_.num_transfers(), 2);

  views_[1].alive = false;  // the holder of request 7 never answers: it is placed again
  TransferActions out = planner_.EndTransfersOf(Snapshot(), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kPlace);
  EXPECT_EQ(out[0].work->request_id, 7);
  EXPECT_FALSE(out[0].unassign);

  views_[0].alive = false;  // pulling into a dead worker: the source releases
  out = planner_.EndTransfersOf(Snapshot(), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kRelease);
  EXPECT_EQ(out[0].worker, 2);
  EXPECT_EQ(planner_.num_transfers(), 0);
}

TEST_F(TransferPlannerTest, APullFromADeadWorkerEndsWhenItsDestinationReportsIt) {
  const TransferActions hold = Start(Work(8, 4), 2, 0);
  TransferEvents held;
  held.held.push_back({.transfer_id = hold[0].hold.transfer_id, .blocks = {20, 21, 22, 23}});
  const TransferActions queued = planner_.OnEvents(Snapshot(), 2, held);
  views_[2].alive = false;
  EXPECT_THAT(planner_.EndTransfersOf(Snapshot(), 2), IsEmpty());
  TransferEvents failed;
  TransferEvents::Pulled& p = failed.pulled.emplace_back();
  p.transfer_id = queued[0].work->pull->transfer_id;
  p.started = true;
  EXPECT_THAT(planner_.OnEvents(Snapshot(), 0, failed), IsEmpty()) << "no source to release";
  EXPECT_EQ(planner_.num_transfers(), 0);
}

// A sequence worker 0 took out: 2 full blocks and 5 tokens computed of `tokens`.
Scheduler::Detached Detached(const QueuedRequest& work, bool preempted) {
  Scheduler::Detached d;
  d.request_id = work.request_id;
  d.tokens = work.request.prompt_ids;
  d.tokens.insert(d.tokens.end(), work.request.output_ids.begin(), work.request.output_ids.end());
  d.num_computed = 2 * kBlockSize + 5;
  d.blocks = {30, 31, 32};
  d.preempted = preempted;
  return d;
}

TEST_F(TransferPlannerTest, ADrainingWorkersSequenceMovesWithItsKv) {
  QueuedRequest work = Work(7, 2);
  work.request.output_ids = {9, 9, 9, 9};
  views_[0].draining = true;
  views_[1].load.num_used_blocks = 50;  // worker 2 is the idler
  absl::flat_hash_map<int, int64_t> taken;
  const TransferActions out =
      planner_.OnDetached(Snapshot(), 0, Detached(work, false), work, &taken);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kQueue);
  EXPECT_EQ(out[0].worker, 2);
  const PullPlan& plan = *out[0].work->pull;
  EXPECT_THAT(plan.src_blocks, ElementsAre(30, 31, 32));
  EXPECT_EQ(plan.tokens.size(), 2u * kBlockSize);
  EXPECT_EQ(plan.tail_tokens, 5) << "the partial block goes along";
  EXPECT_EQ(planner_.NumWaiting(2), 1);
}

TEST_F(TransferPlannerTest, ASequenceThatCannotMoveIsReleasedAndGoesOnWithoutItsKv) {
  QueuedRequest work = Work(7, 2);
  absl::flat_hash_map<int, int64_t> taken;
  // Not the worker's any more (finished or moved): its blocks are released.
  TransferActions out = planner_.OnDetached(Snapshot(), 0, Detached(work, false), {}, &taken);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kRelease);
  // Its tokens differ from what the worker delivered: placed anew, computed there.
  Scheduler::Detached stale = Detached(work, false);
  stale.tokens.push_back(5);
  out = planner_.OnDetached(Snapshot(), 0, stale, work, &taken);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, Kind::kRelease);
  EXPECT_EQ(out[1].kind, Kind::kPlace);
  EXPECT_TRUE(out[1].unassign);
  // A preempted one with nowhere to go waits on its worker again, from its cached blocks.
  views_[1].load.num_waiting = 1;
  views_[2].draining = true;
  out = planner_.OnDetached(Snapshot(), 0, Detached(work, true), work, &taken);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].kind, Kind::kQueue);
  EXPECT_EQ(out[1].worker, 0);
  // A dead worker's sequences were moved when it died.
  views_[0].alive = false;
  EXPECT_THAT(planner_.OnDetached(Snapshot(), 0, Detached(work, true), work, &taken), IsEmpty());
}

TEST_F(TransferPlannerTest, PreemptedSequencesMoveOnlyWhereTheyAndAsManyTokensAgainFit) {
  // Worker 1 has 100 free blocks: room for 50. A 2-block sequence needs 3 (its next token).
  views_[2].alive = false;
  views_[0].load.num_preempted = 2;
  EXPECT_EQ(planner_.PreemptedRoom(Snapshot(), 0), 50);
  QueuedRequest work = Work(7, 2);
  absl::flat_hash_map<int, int64_t> taken = {{1, 47}};  // earlier moves of the batch
  TransferActions out = planner_.OnDetached(Snapshot(), 0, Detached(work, true), work, &taken);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 1);
  EXPECT_EQ(taken[1], 50);
  out = planner_.OnDetached(Snapshot(), 0, Detached(work, true), work, &taken);
  ASSERT_EQ(out.size(), 2u) << "no room left: it stays";
  EXPECT_EQ(out[1].worker, 0);

  views_[1].load.num_waiting = 1;  // requests wait there: it has no room
  EXPECT_EQ(planner_.PreemptedRoom(Snapshot(), 0), 0);
  views_[1].load.num_waiting = 0;
  views_[0].load.num_preempted = 0;
  EXPECT_EQ(planner_.PreemptedRoom(Snapshot(), 0), 0) << "none preempted";
}

TEST_F(TransferPlannerTest, ASequenceWithNoBlocksLeftCachedMovesWithoutAPull) {
  QueuedRequest work = Work(7, 2);
  Scheduler::Detached d = Detached(work, true);
  d.blocks.clear();
  absl::flat_hash_map<int, int64_t> taken;
  const TransferActions out = planner_.OnDetached(Snapshot(), 0, d, work, &taken);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Kind::kQueue);
  EXPECT_NE(out[0].worker, 0);
  EXPECT_FALSE(out[0].work->pull.has_value());
}

TEST_F(TransferPlannerTest, CandidatesCountTheRequestsWaitingInTransfers) {
  Start(Work(7, 4), 1, 0);
  const auto all = [](const WorkerView& w) { return w.alive; };
  const std::vector<WorkerLoad> with = planner_.Candidates(Snapshot(), all, true);
  const std::vector<WorkerLoad> without = planner_.Candidates(Snapshot(), all, false);
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[0].num_waiting, 1);
  EXPECT_EQ(without[0].num_waiting, 0);
  EXPECT_TRUE(with[0].can_pull);
}

}  // namespace
}  // namespace pagoda
