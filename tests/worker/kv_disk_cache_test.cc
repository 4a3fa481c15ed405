#include "worker/kv_disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

constexpr int kBs = 4;

ModelConfig SmallConfig() {
  ModelConfig c;
  c.num_layers = 3;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

// Every byte of block b, layer l, K or V is distinct: a block that moves shows it.
void Fill(KvPool& pool, int b, int seed) {
  for (int l = 0; l < pool.num_layers(); ++l) {
    for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
      std::span<std::byte> bytes = pool.MutableBlockBytes(b, l, part);
      for (size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = static_cast<std::byte>(seed * 31 + l * 7 + (part == KvPool::Part::kV) + i);
      }
    }
  }
}

std::vector<std::byte> Bytes(const KvPool& pool, int b) {
  std::vector<std::byte> out;
  for (int l = 0; l < pool.num_layers(); ++l) {
    for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
      const std::span<const std::byte> bytes = pool.BlockBytes(b, l, part);
      out.insert(out.end(), bytes.begin(), bytes.end());
    }
  }
  return out;
}

std::vector<int> Range(int from, int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::unique_ptr<KvDiskCache> Open(const std::string& dir, const KvPool& pool,
                                  const std::string& fingerprint = "m") {
  KvDiskCacheOptions options;
  options.dir = dir;
  absl::StatusOr<std::unique_ptr<KvDiskCache>> cache =
      KvDiskCache::Open(options, fingerprint, pool);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return cache.ok() ? *std::move(cache) : nullptr;
}

// A worker wrote a prompt of three full blocks into pool blocks 6, 2, 5.
struct Worker {
  KvPool pool{SmallConfig(), 8, kBs, KvDtype::kBf16};
  KvLedger ledger{8, kBs};
  Worker() {
    const std::vector<int> table = {6, 2, 5};
    for (int i = 0; i < 3; ++i) Fill(pool, table[i], 10 + i);
    ledger.Wrote(table, 0, Range(100, 3 * kBs));
  }
};

TEST(KvDiskCacheTest, WhatADrainSavesARestartLoadsIntoFreeBlocksAndOffers) {
  const std::string dir = testing::TempDir() + "/kv";
  Worker before;
  {
    auto cache = Open(dir, before.pool);
    cache->SaveAll(before.pool, before.ledger);
    EXPECT_EQ(cache->stats().written, 3);
  }
  KvPool pool(SmallConfig(), 8, kBs, KvDtype::kBf16);
  KvLedger ledger(8, kBs);
  auto cache = Open(dir, pool);
  EXPECT_EQ(cache->Restore(100, &pool, &ledger), 3);
  const std::vector<CachedBlock> offered = ledger.Export(8);
  ASSERT_EQ(offered.size(), 3u);
  const int old_block[] = {6, 2, 5};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(offered[i].block, i) << "loaded into blocks 0, 1, 2 in chain order";
    EXPECT_EQ(offered[i].parent, i - 1);
    EXPECT_EQ(offered[i].tokens, Range(100 + i * kBs, kBs));
    EXPECT_EQ(Bytes(pool, i), Bytes(before.pool, old_block[i])) << i;
  }
}

TEST(KvDiskCacheTest, ABlockAboutToBeOverwrittenIsWrittenOutFirst) {
  const std::string dir = testing::TempDir() + "/kv";
  Worker w;
  const std::vector<std::byte> first = Bytes(w.pool, 6);
  {
    auto cache = Open(dir, w.pool);
    cache->BeforeOverwrite(6, w.pool, w.ledger);  // the router reuses the prompt's first block
    cache->BeforeOverwrite(3, w.pool, w.ledger);  // never written: nothing to keep
    Fill(w.pool, 6, 99);                          // the step's forward overwrites it
  }                                               // the writer finishes its queue
  KvPool pool(SmallConfig(), 8, kBs, KvDtype::kBf16);
  KvLedger ledger(8, kBs);
  auto cache = Open(dir, pool);
  EXPECT_EQ(cache->store().num_files(), 1);
  EXPECT_EQ(cache->Restore(100, &pool, &ledger), 1);
  EXPECT_EQ(Bytes(pool, 0), first) << "the bytes as they were before the overwrite";
}

TEST(KvDiskCacheTest, AnotherModelOrDtypeLoadsNothing) {
  const std::string dir = testing::TempDir() + "/kv";
  Worker w;
  Open(dir, w.pool)->SaveAll(w.pool, w.ledger);
  KvPool f32(SmallConfig(), 8, kBs, KvDtype::kF32);
  KvLedger ledger(8, kBs);
  EXPECT_EQ(Open(dir, f32)->Restore(100, &f32, &ledger), 0) << "another K/V dtype";
  Open(dir, w.pool)->SaveAll(w.pool, w.ledger);
  KvPool bf16(SmallConfig(), 8, kBs, KvDtype::kBf16);
  EXPECT_EQ(Open(dir, bf16, "another model")->Restore(100, &bf16, &ledger), 0);
}

// A disk that does not answer: the writer is stuck opening a block's file (a FIFO nobody reads
// stands in for it). A step's next block finds the queue full and is dropped, counted; the step
// never waits.
TEST(KvDiskCacheTest, WhenTheDiskIsStuckBlocksAreDroppedNeverWaitedFor) {
  const std::string dir = testing::TempDir() + "/kv";
  Worker w;
  KvDiskCacheOptions options;
  options.dir = dir;
  options.queue_bytes = 1;  // one block in the queue
  auto cache = *KvDiskCache::Open(options, "m", w.pool);
  // The chain's first block on disk first, which also shows the directory's file names.
  KvLedger first(8, kBs);
  first.Wrote(std::vector<int>{6}, 0, Range(100, kBs));
  cache->SaveAll(w.pool, first);
  ASSERT_EQ(cache->store().num_files(), 1);
  std::string name;
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    if (item.path().extension() == ".kvb") name = item.path().filename().string();
  }
  const uint64_t root = KvLedger::ChainHash(0, Range(100, kBs));
  const uint64_t second = KvLedger::ChainHash(root, Range(100 + kBs, kBs));
  const std::string stuck =
      absl::StrFormat("%s/%s-%016x-%016x.kvb.tmp", dir, name.substr(0, 16), second, root);
  ASSERT_EQ(mkfifo(stuck.c_str(), 0600), 0);

  cache->BeforeOverwrite(2, w.pool, w.ledger);  // queued; the writer blocks on its file
  cache->BeforeOverwrite(5, w.pool, w.ledger);  // the queue is full: dropped at once
  EXPECT_EQ(cache->stats().dropped, 1);

  // The disk answers again: the stuck write completes.
  const int fd = open(stuck.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buffer[4096];
  while (read(fd, buffer, sizeof(buffer)) > 0) {
  }
  close(fd);
  cache.reset();
}

TEST(KvDiskCacheTest, ARestoreFillsNoMoreThanItIsAllowed) {
  const std::string dir = testing::TempDir() + "/kv";
  Worker w;
  Open(dir, w.pool)->SaveAll(w.pool, w.ledger);
  KvPool pool(SmallConfig(), 8, kBs, KvDtype::kBf16);
  KvLedger ledger(8, kBs);
  EXPECT_EQ(Open(dir, pool)->Restore(2, &pool, &ledger), 2);
  EXPECT_EQ(ledger.Export(8).size(), 2u) << "the chain's first two blocks";
}

}  // namespace
}  // namespace pagoda
