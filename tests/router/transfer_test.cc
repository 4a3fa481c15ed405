// The router's bookkeeping of KV transfers between workers (issue 28), without processes:
// blocks held for a peer survive eviction, pulled blocks become prefix hits, a pulled partial
// block joins its sequence's table, and the pull-or-compute arithmetic. The transfers through
// real workers are in tests/integration/kv_transfer_serving_test.cc.
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/kv_cache_manager.h"
#include "router/transfer_cost.h"

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

}  // namespace
}  // namespace pagoda
