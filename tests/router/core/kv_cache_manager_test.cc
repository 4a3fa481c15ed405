#include "router/core/kv_cache_manager.h"

#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Tokens(int n, int first = 100) {
  std::vector<int> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The manager takes the caller's block hashes, as the scheduler passes a sequence's own.
PrefixHit Find(const KVCacheManager& kv, const std::vector<int>& tokens) {
  return kv.FindCachedPrefix(tokens, BlockHashes(tokens, kv.block_size()));
}
void Cache(KVCacheManager& kv, int64_t seq, const std::vector<int>& tokens, int num_computed) {
  kv.CacheFullBlocks(seq, tokens, BlockHashes(tokens, kv.block_size()), num_computed);
}

TEST(KVCacheManagerTest, AllocateAndFreeReturnUsedBlocksToZero) {
  KVCacheManager kv(10, 4);
  const std::vector<int> t = Tokens(10);
  const PrefixHit none = Find(kv, t);
  ASSERT_TRUE(kv.CanAllocate(none, 10));
  kv.Allocate(1, none, 10);
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  EXPECT_EQ(kv.pool().num_used_blocks(), 3);
  kv.Free(1);
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);
}

TEST(KVCacheManagerTest, ARepeatedPrefixReusesBlocks) {
  KVCacheManager kv(10, 4);
  const std::vector<int> t = Tokens(10);
  kv.Allocate(1, Find(kv, t), 10);
  Cache(kv, 1, t, 10);  // blocks 0 and 1 are full
  const std::vector<int> first = kv.block_table(1);
  kv.Free(1);

  std::vector<int> t2 = t;
  t2.push_back(7);
  const PrefixHit hit = Find(kv, t2);
  EXPECT_EQ(hit.num_tokens(4), 8);
  EXPECT_THAT(hit.blocks, ElementsAre(first[0], first[1]));
  kv.Allocate(2, hit, 11);
  EXPECT_EQ(kv.block_table(2)[0], first[0]);
  EXPECT_EQ(kv.block_table(2)[1], first[1]);
  // A prompt that diverges inside block 1 only hits block 0.
  std::vector<int> t3 = t;
  t3[5] = 1;
  EXPECT_EQ(Find(kv, t3).num_tokens(4), 4);
}

TEST(KVCacheManagerTest, TheLastTokenIsNeverACacheHit) {
  KVCacheManager kv(10, 4);
  const std::vector<int> t = Tokens(8);  // exactly two blocks
  kv.Allocate(1, Find(kv, t), 8);
  Cache(kv, 1, t, 8);
  // The same 8 tokens again: only the first block may hit, so the last token is recomputed.
  EXPECT_EQ(Find(kv, t).num_tokens(4), 4);
}

TEST(KVCacheManagerTest, EvictionIsLeastRecentlyUsedAndTailBlocksGoFirst) {
  KVCacheManager kv(4, 2);
  const std::vector<int> a = Tokens(5, 0), b = Tokens(5, 50);
  kv.Allocate(1, Find(kv, a), 4);
  Cache(kv, 1, a, 4);
  kv.Allocate(2, Find(kv, b), 4);
  Cache(kv, 2, b, 4);
  kv.Free(1);  // a's blocks are older in the free queue
  kv.Free(2);
  // One new block evicts a's tail block first: a keeps its first block, b keeps both.
  kv.Allocate(3, PrefixHit(), 1);
  EXPECT_EQ(Find(kv, a).num_tokens(2), 2);
  EXPECT_EQ(Find(kv, b).num_tokens(2), 4);
  EXPECT_EQ(kv.pool().num_evictions(), 1);
}

TEST(KVCacheManagerTest, CannotAllocateIsAnAnswerNotACrash) {
  KVCacheManager kv(2, 4);
  EXPECT_FALSE(kv.CanAllocate(PrefixHit(), 9));
  EXPECT_TRUE(kv.CanAllocate(PrefixHit(), 8));
  kv.Allocate(1, PrefixHit(), 8);
  EXPECT_FALSE(kv.CanAppend(1, 8, 9));
}

TEST(KVCacheManagerTest, ForkSharesBlocksAndCopyOnWriteCopiesTheSharedPartialBlock) {
  KVCacheManager kv(10, 4);
  kv.Allocate(1, PrefixHit(), 6);  // blocks: [full, partial(2 of 4)]
  kv.Fork(1, 2);
  EXPECT_EQ(kv.block_table(1), kv.block_table(2));
  EXPECT_EQ(kv.pool().ref_count(kv.block_table(1)[1]), 2);
  EXPECT_EQ(kv.pool().num_used_blocks(), 2);

  // Child writes position 6 inside the shared partial block: it gets a copy first.
  const int shared = kv.block_table(2)[1];
  ASSERT_TRUE(kv.CanAppend(2, 6, 7));
  std::vector<BlockCopy> copies;
  EXPECT_EQ(kv.Append(2, 6, 7, &copies), 1);  // entry 1 changed
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared);
  EXPECT_EQ(copies[0].dst, kv.block_table(2)[1]);
  EXPECT_NE(kv.block_table(2)[1], shared);
  EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]) << "full blocks stay shared";
  // The parent is now the only owner and writes in place.
  copies.clear();
  EXPECT_EQ(kv.Append(1, 6, 7, &copies), 2);
  EXPECT_THAT(copies, IsEmpty());
  EXPECT_EQ(kv.block_table(1)[1], shared);
  kv.Free(1);
  kv.Free(2);
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);
}

// Issue 38: a worker's pool offered at join (what a previous router cached there).
TEST(KVCacheManagerTest, AdoptedBlocksAreHitsAndTheirChainsFirstBlocksGoLast) {
  KVCacheManager kv(6, 4);
  const std::vector<int> t = Tokens(13);
  const std::vector<CachedBlock> cached = {
      {.block = 4, .parent = -1, .tokens = {100, 101, 102, 103}},
      {.block = 1, .parent = 0, .tokens = {104, 105, 106, 107}},
      {.block = 5, .parent = 1, .tokens = {108, 109, 110, 111}}};
  const std::vector<uint64_t> hashes = kv.Adopt(cached, /*root=*/0);
  EXPECT_EQ(hashes, BlockHashes(std::span<const int>(t).first(12), 4));
  EXPECT_THAT(Find(kv, t).blocks, ElementsAre(4, 1, 5));
  EXPECT_EQ(kv.pool().num_used_blocks(), 0);  // cached, free to evict
  // Three fresh blocks go before any adopted one; then the chain's last block before its first.
  const PrefixHit none;
  kv.Allocate(1, none, 16);
  EXPECT_THAT(kv.block_table(1), ElementsAre(0, 2, 3, 5));
  EXPECT_THAT(Find(kv, t).blocks, ElementsAre(4, 1));
}

}  // namespace
}  // namespace pagoda
