// The router's bookkeeping of KV transfers between workers (issue 28), without processes:
// blocks held for a peer survive eviction, pulled blocks become prefix hits, a pulled partial
// block joins its sequence's table, the pull-or-compute arithmetic, and a request that stops
// waiting for a stuck holder. The transfers through
// real workers are in tests/integration/kv_transfer_serving_test.cc.
#include <numeric>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/cluster.h"
#include "router/core/kv_cache_manager.h"
#include "router/transfer/transfer_cost.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

std::vector<int> Tokens(int n, int first = 100) {
  std::vector<int> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(KvTransferBookkeepingTest, HeldBlocksOutliveEvictionUntilReleased) {
  KVCacheManager kv(4, 4);
  const std::vector<int> t = Tokens(12);
  const std::vector<uint64_t> hashes = BlockHashes(t, 4);
  kv.Allocate(1, PrefixHit(), 12);
  kv.CacheFullBlocks(1, t, hashes, 12);
  kv.Free(1);
  // A peer asks for the prefix: all three cached blocks, held.
  const std::vector<int> held = kv.HoldCachedPrefix(t, hashes);
  ASSERT_THAT(held, SizeIs(3));
  EXPECT_EQ(kv.pool().num_used_blocks(), 3);
  // Only the fourth block is free: a sequence that needs two cannot evict the held ones.
  EXPECT_FALSE(kv.CanAllocate(PrefixHit(), 8));
  EXPECT_EQ(kv.NumCachedBlocks(t, hashes), 3);
  kv.Release(held);
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);
  EXPECT_EQ(kv.NumCachedBlocks(t, hashes), 3);  // still cached after the release
}

TEST(KvTransferBookkeepingTest, PulledBlocksBecomePrefixHits) {
  KVCacheManager kv(8, 4);
  const std::vector<int> t = Tokens(13);
  const std::vector<uint64_t> hashes = BlockHashes(t, 4);
  EXPECT_EQ(kv.NumCachedBlocks(t, hashes), 0);
  const std::vector<int> dst = kv.HoldFreeBlocks(3);
  ASSERT_THAT(dst, SizeIs(3));
  EXPECT_THAT(kv.HoldFreeBlocks(6), SizeIs(0)) << "5 free: all or nothing";
  kv.CacheHeldBlocks(dst, t, hashes);
  kv.Release(dst);
  const PrefixHit hit = kv.FindCachedPrefix(t, hashes);
  EXPECT_EQ(hit.blocks, dst);
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);
}

TEST(KvTransferBookkeepingTest, APulledPartialBlockJoinsItsSequenceUncached) {
  KVCacheManager kv(8, 4);
  const std::vector<int> t = Tokens(11);  // 2 full blocks, then 3 tokens
  const std::vector<uint64_t> hashes = BlockHashes(t, 4);
  std::vector<int> dst = kv.HoldFreeBlocks(3);
  kv.CacheHeldBlocks(std::span(dst).first(2), t, hashes);
  kv.Release(std::span(dst).first(2));
  const PrefixHit hit = kv.FindCachedPrefix(t, hashes);
  ASSERT_THAT(hit.blocks, SizeIs(2));
  kv.AllocateWithTail(7, hit, dst[2], 12);
  EXPECT_THAT(kv.block_table(7), ElementsAre(dst[0], dst[1], dst[2]));
  EXPECT_EQ(kv.pool().ref_count(dst[2]), 1) << "the table's reference replaced the pull's";
  // The sequence writes its 12th token into the tail: no copy, it is its own.
  ASSERT_TRUE(kv.CanAppend(7, 11, 12));
  std::vector<BlockCopy> copies;
  kv.Append(7, 11, 12, &copies);
  EXPECT_TRUE(copies.empty());
  kv.Free(7);
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);
}

TEST(TransferCostTest, PullsWhileMovingBytesBeatsComputingTokens) {
  TransferCost cost;
  // Not measured: a pull is assumed to pay.
  EXPECT_TRUE(cost.Pays(int64_t{1} << 30, 16, 0));
  EXPECT_FALSE(cost.Pays(1000, 0, 1e-3)) << "nothing to spare";
  // 1.1B f32: 45 KB a token at ~1 GB/s against ~5 ms a prompt token on two cores.
  for (int i = 0; i < 20; ++i) cost.ObservePull(45 << 20, 0.05);
  EXPECT_NEAR(cost.bytes_per_second(), (45 << 20) / (0.05 - 2e-3), 5e7);
  EXPECT_TRUE(cost.Pays(int64_t{45000} * 1000, 1000, 5e-3));
  // A tiny model computes a token in microseconds: 16 tokens are not worth a round trip.
  for (int i = 0; i < 20; ++i) cost.ObservePull(4096, 0.004);
  EXPECT_NEAR(cost.latency_seconds(), 0.004, 1e-4);
  EXPECT_FALSE(cost.Pays(4096, 16, 2e-5));
  EXPECT_TRUE(cost.Pays(4096, 16, 1e-3));
}

// A worker that announces a KV transfer address (in-process: it never serves one).
class AddressedExecutor final : public Executor {
 public:
  explicit AddressedExecutor(std::shared_ptr<Executor> real) : real_(std::move(real)) {
    info_ = real_->info();
    info_.kv_transfer_address = "127.0.0.1:9";
  }
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    return real_->Execute(command);
  }

 private:
  std::shared_ptr<Executor> real_;
  WorkerInfo info_;
};

// One sequence's tokens, and whether it finished.
struct Output {
  absl::Mutex mu;
  std::vector<int> ids ABSL_GUARDED_BY(mu);
  std::vector<int> workers ABSL_GUARDED_BY(mu);
  bool finished ABSL_GUARDED_BY(mu) = false;
  RequestSink Sink() {
    return [this](const RequestUpdate& u) {
      absl::MutexLock lock(&mu);
      ids.insert(ids.end(), u.token_ids.begin(), u.token_ids.end());
      if (!u.token_ids.empty()) workers.push_back(u.worker_id);
      finished |= u.finished;
      return true;
    };
  }
  bool Finished() {
    absl::MutexLock lock(&mu);
    return finished;
  }
};

TEST(KvTransferWaitTest, ARequestStopsWaitingForAStuckHolderAndComputesItsPrefix) {
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  const testing::GoldenCase& c = golden[5];  // 19 tokens: one full block
  ClusterOptions o;
  o.engine.max_model_len = 257;
  o.placement = PlacementPolicy::kRoundRobin;  // the first request on worker 0, then worker 1
  o.kv_transfer_min_tokens = 0;
  o.kv_transfer_max_wait = absl::Milliseconds(200);
  Cluster cluster(testing::Stories260KConfig(), o);
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorker());
  ASSERT_TRUE(cluster.AddWorker(std::make_shared<AddressedExecutor>(gate)).ok());
  ASSERT_TRUE(cluster.AddWorker(std::make_shared<AddressedExecutor>(testing::NewWorker())).ok());
  GenerationRequest request;
  request.prompt_ids = c.prompt_ids;
  request.sampling.temperature = 0;
  request.max_tokens = 8;
  // Worker 0 computes the prompt, one step at a time; the step after its last (which tells the
  // worker the sequence finished) stays at the gate: worker 0's loop is stuck in it.
  Output first;
  ASSERT_TRUE(cluster.Submit(request, first.Sink()).ok());
  for (int allowed = 1; !first.Finished(); ++allowed) {
    gate->Allow(1);
    gate->WaitEntered(allowed + 1);
  }
  // Worker 1 asks worker 0 to hold the prefix; no answer comes, and after 200 ms it computes it.
  Output second;
  ASSERT_TRUE(cluster.Submit(request, second.Sink()).ok());
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        cluster.Tick(absl::Now());
        return second.Finished();
      },
      std::chrono::seconds(60), "the second request finishes", std::chrono::milliseconds(20)));
  {
    absl::MutexLock a(&first.mu), b(&second.mu);
    EXPECT_EQ(second.ids, first.ids);
    EXPECT_EQ(std::vector<int>(second.ids.begin(), second.ids.end()),
              std::vector<int>(c.greedy_ids.begin(), c.greedy_ids.begin() + 8));
    EXPECT_THAT(second.workers, ::testing::Each(1));
  }
  // Worker 0 goes on, answers the hold nobody waits for any more, and releases the blocks.
  gate->Allow(1000);
  ASSERT_TRUE(testing::WaitUntil([&] { return cluster.stats().num_used_blocks == 0; },
                                 std::chrono::seconds(60), "every block is free again",
                                 std::chrono::milliseconds(20)));
}

}  // namespace
}  // namespace pagoda
