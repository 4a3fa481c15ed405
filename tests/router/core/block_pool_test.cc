#include "router/core/block_pool.h"

#include <vector>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(BlockPoolTest, AllocatesInFreeQueueOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.Allocate(), 0);
  EXPECT_EQ(pool.Allocate(), 1);
  EXPECT_EQ(pool.num_used_blocks(), 2);
  EXPECT_EQ(pool.ref_count(0), 1);
}

TEST(BlockPoolTest, ReleasedBlocksAreReusedLeastRecentlyFreedFirst) {
  BlockPool pool(3);
  const int a = pool.Allocate(), b = pool.Allocate(), c = pool.Allocate();
  pool.Release(b);
  pool.Release(a);
  pool.Release(c);
  EXPECT_EQ(pool.Allocate(), b);
  EXPECT_EQ(pool.Allocate(), a);
  EXPECT_EQ(pool.Allocate(), c);
}

TEST(BlockPoolTest, FreedBlocksKeepTheirHashUntilReused) {
  BlockPool pool(2);
  const std::vector<int> tokens = {5, 6, 7, 8};
  const uint64_t h = HashBlock(0, tokens);
  const int b = pool.Allocate();
  pool.Cache(b, h, tokens);
  pool.Release(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.Lookup(h, tokens), b) << "a freed block is still a cache hit";
  pool.Allocate();  // the other block (free-queue head)
  EXPECT_EQ(pool.Lookup(h, tokens), b);
  EXPECT_EQ(pool.Allocate(), b);  // now reused: evicted
  EXPECT_EQ(pool.Lookup(h, tokens), -1);
  EXPECT_EQ(pool.num_evictions(), 1);
}

TEST(BlockPoolTest, TouchRemovesACachedBlockFromTheMiddleOfTheFreeQueue) {
  BlockPool pool(3);
  const int a = pool.Allocate(), b = pool.Allocate(), c = pool.Allocate();
  pool.Release(a);
  pool.Release(b);
  pool.Release(c);
  pool.Touch(b);  // a prefix hit revives b
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.Allocate(), a);
  EXPECT_EQ(pool.Allocate(), c);
}

TEST(BlockPoolTest, HitsCompareTokensNotJustTheHash) {
  BlockPool pool(1);
  const std::vector<int> tokens = {1, 2}, other = {3, 4};
  const int b = pool.Allocate();
  pool.Cache(b, 99, tokens);
  EXPECT_EQ(pool.Lookup(99, tokens), b);
  EXPECT_EQ(pool.Lookup(99, other), -1);
}

TEST(BlockPoolTest, HashIsChainedAndStable) {
  const std::vector<int> t = {1, 2, 3};
  EXPECT_EQ(HashBlock(0, t), HashBlock(0, t));
  EXPECT_NE(HashBlock(0, t), HashBlock(1, t));
  EXPECT_NE(HashBlock(0, t), HashBlock(0, std::vector<int>{1, 2, 4}));
  // Pinned: XXH3 of the token ids' bytes, seeded with the parent's hash; it must not change
  // between processes or builds.
  EXPECT_EQ(HashBlock(0, t), 0x6BBF7429332BEA48ULL);
  EXPECT_EQ(HashBlock(HashBlock(0, t), t), 0x11CDEE278F463CB9ULL);
}

TEST(BlockPoolTest, BlockHashesChainTheFullBlocksOnly) {
  const std::vector<int> tokens = {1, 2, 3, 4, 5, 6, 7};  // two full blocks of 3, one partial
  const std::vector<uint64_t> hashes = BlockHashes(tokens, 3);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], HashBlock(0, std::vector<int>{1, 2, 3}));
  EXPECT_EQ(hashes[1], HashBlock(hashes[0], std::vector<int>{4, 5, 6}));
  // Extending hashes only what is missing: a wrong first entry stays and feeds the chain.
  std::vector<uint64_t> extended = {99};
  ExtendBlockHashes(tokens, 3, 2, &extended);
  EXPECT_EQ(extended[0], 99u);
  EXPECT_EQ(extended[1], HashBlock(99, std::vector<int>{4, 5, 6}));
}

TEST(BlockHashTest, ASaltOrAnotherKeyStartsAnotherChain) {
  const std::vector<int> t = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(PrefixRoot(7, ""), 7u);
  EXPECT_NE(PrefixRoot(7, "a"), PrefixRoot(7, "b"));
  EXPECT_NE(PrefixRoot(7, "a"), PrefixRoot(8, "a"));
  const std::vector<uint64_t> salted = BlockHashes(t, 3, PrefixRoot(7, "a"));
  EXPECT_EQ(salted[0], HashBlock(PrefixRoot(7, "a"), std::vector<int>{1, 2, 3}));
  EXPECT_EQ(salted[1], HashBlock(salted[0], std::vector<int>{4, 5, 6}));
  EXPECT_NE(salted, BlockHashes(t, 3, 7));
}

}  // namespace
}  // namespace pagoda
