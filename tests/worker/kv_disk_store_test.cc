#include "worker/kv_disk_store.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/kv_ledger.h"

namespace pagoda {
namespace {

constexpr int kBs = 4;
constexpr int kKvBytes = 96;

KvDiskSpace Space(const std::string& fingerprint = "model-a") {
  return {fingerprint, kBs, kKvBytes};
}

// A block of a chain: its tokens, hash and bytes (each byte from `seed`).
struct Block {
  std::vector<int> tokens;
  uint64_t hash = 0, parent = 0;
  std::vector<std::byte> kv;
};
Block MakeBlock(int first_token, const Block* parent = nullptr) {
  Block b;
  b.tokens.resize(kBs);
  std::iota(b.tokens.begin(), b.tokens.end(), first_token);
  b.parent = parent ? parent->hash : 0;
  b.hash = KvLedger::ChainHash(b.parent, b.tokens);
  for (int i = 0; i < kKvBytes; ++i) b.kv.push_back(static_cast<std::byte>(first_token * 7 + i));
  return b;
}

std::unique_ptr<KvDiskStore> OpenStore(const std::string& dir, int64_t max_files = 100,
                                       const std::string& fingerprint = "model-a") {
  const int64_t file_bytes = 56 + kBs * 4 + kKvBytes;
  absl::StatusOr<std::unique_ptr<KvDiskStore>> store =
      KvDiskStore::Open(dir, Space(fingerprint), max_files * file_bytes);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

void Write(KvDiskStore& store, const Block& b) {
  ASSERT_TRUE(store.Write(b.hash, b.parent, b.tokens, b.kv).ok());
}

std::vector<std::string> BlockFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (name != "LOCK") names.push_back(name);
  }
  return names;
}

std::vector<uint64_t> Hashes(const std::vector<KvDiskStore::Planned>& plan) {
  std::vector<uint64_t> out;
  for (const auto& p : plan) out.push_back(p.hash);
  return out;
}

TEST(KvDiskStoreTest, BlocksWrittenReadBackAfterAReopenParentsFirst) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20, &a), c = MakeBlock(30, &b);
  {
    auto store = OpenStore(dir);
    Write(*store, a);
    Write(*store, b);
    Write(*store, c);
  }
  auto store = OpenStore(dir);
  EXPECT_EQ(store->num_files(), 3);
  EXPECT_THAT(Hashes(store->Plan(10)), ::testing::ElementsAre(a.hash, b.hash, c.hash));
  std::vector<int> tokens(kBs);
  std::vector<std::byte> kv(kKvBytes);
  ASSERT_TRUE(store->Read(b.hash, tokens, kv).ok());
  EXPECT_EQ(tokens, b.tokens);
  EXPECT_EQ(kv, b.kv);
}

TEST(KvDiskStoreTest, APlanTakesWholeChainsFromTheirFirstBlockWithinItsBound) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20, &a), c = MakeBlock(30, &b);
  const Block orphan_parent = MakeBlock(40), orphan = MakeBlock(50, &orphan_parent);
  auto store = OpenStore(dir);
  Write(*store, a);
  Write(*store, b);
  Write(*store, c);
  Write(*store, orphan);  // its parent was never written: it cannot be loaded
  EXPECT_THAT(Hashes(store->Plan(2)), ::testing::ElementsAre(a.hash, b.hash));
  EXPECT_THAT(Hashes(store->Plan(10)), ::testing::ElementsAre(a.hash, b.hash, c.hash));
}

TEST(KvDiskStoreTest, PastItsBoundTheLeastRecentlyUsedGoTailsBeforeHeads) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20, &a), x = MakeBlock(60), y = MakeBlock(70);
  auto store = OpenStore(dir, /*max_files=*/3);
  Write(*store, a);
  Write(*store, b);  // uses a after it
  Write(*store, x);
  store->Touch(b.hash);  // b, then a, used after x
  Write(*store, y);      // one too many: x, the least recently used, goes
  EXPECT_FALSE(store->Contains(x.hash));
  EXPECT_TRUE(store->Contains(a.hash) && store->Contains(b.hash) && store->Contains(y.hash));
  EXPECT_EQ(BlockFiles(dir).size(), 3u);
  const Block z = MakeBlock(80);
  Write(*store, z);  // now b, the tail of a's chain, goes before a
  EXPECT_FALSE(store->Contains(b.hash));
  EXPECT_TRUE(store->Contains(a.hash));
}

// Across a restart the order is the files' times, a chain's head no older than its tail.
TEST(KvDiskStoreTest, AReopenedDirectoryKeepsItsOrderByFileTimes) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20, &a), x = MakeBlock(60);
  {
    auto store = OpenStore(dir);
    Write(*store, a);
    Write(*store, b);
    Write(*store, x);
  }
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const std::string& name : BlockFiles(dir)) {
    // a oldest, then x, then b (a's tail): a counts as used with b, after x.
    const bool is_a = name.find(absl::StrFormat("%016x-", a.hash)) == 17;
    const bool is_x = name.find(absl::StrFormat("%016x-", x.hash)) == 17;
    std::filesystem::last_write_time(dir + "/" + name, now - std::chrono::hours(is_a   ? 3
                                                                                : is_x ? 2
                                                                                       : 1));
  }
  auto store = OpenStore(dir, 3);
  Write(*store, MakeBlock(90));
  EXPECT_FALSE(store->Contains(x.hash));
  EXPECT_TRUE(store->Contains(a.hash) && store->Contains(b.hash));
}

TEST(KvDiskStoreTest, AnotherModelsFilesAreForeignAndRemovedOthersLeftAlone) {
  const std::string dir = testing::TempDir() + "/kv";
  {
    auto store = OpenStore(dir);
    Write(*store, MakeBlock(10));
  }
  testing::WriteFile(dir + "/notes.txt", "not a block");
  auto store = OpenStore(dir, 100, "model-b");
  EXPECT_EQ(store->num_files(), 0);
  EXPECT_THAT(BlockFiles(dir), ::testing::ElementsAre("notes.txt"));
}

TEST(KvDiskStoreTest, TornAndCorruptFilesAreRemovedNeverLoaded) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20), c = MakeBlock(30);
  {
    auto store = OpenStore(dir);
    Write(*store, a);
    Write(*store, b);
    Write(*store, c);
  }
  std::string torn, corrupt;
  for (const std::string& name : BlockFiles(dir)) {
    if (name.find(absl::StrFormat("%016x", a.hash)) != std::string::npos) torn = dir + "/" + name;
    if (name.find(absl::StrFormat("%016x", b.hash)) != std::string::npos) {
      corrupt = dir + "/" + name;
    }
  }
  std::filesystem::resize_file(torn, 40);  // cut short
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');  // a flipped byte in the K/V
  }
  testing::WriteFile(dir + "/0000000000000000-0000000000000001-0000000000000000.kvb.tmp", "x");
  auto store = OpenStore(dir);
  EXPECT_EQ(store->num_files(), 2) << "the torn file and the temporary one go at once";
  std::vector<int> tokens(kBs);
  std::vector<std::byte> kv(kKvBytes);
  const absl::Status read = store->Read(b.hash, tokens, kv);
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss) << read;
  EXPECT_THAT(read.message(), ::testing::HasSubstr("checksum"));
  EXPECT_FALSE(store->Contains(b.hash));
  EXPECT_TRUE(store->Read(c.hash, tokens, kv).ok());
  EXPECT_EQ(BlockFiles(dir).size(), 1u);
}

TEST(KvDiskStoreTest, AFileWhoseNameLiesAboutItsBlockIsRemoved) {
  const std::string dir = testing::TempDir() + "/kv";
  const Block a = MakeBlock(10), b = MakeBlock(20);
  std::string name_a;
  {
    auto store = OpenStore(dir);
    Write(*store, a);
    name_a = BlockFiles(dir).at(0);
  }
  // a's file under b's name: its header says otherwise.
  std::string name_b = name_a;
  name_b.replace(17, 16, absl::StrFormat("%016x", b.hash));
  std::filesystem::rename(dir + "/" + name_a, dir + "/" + name_b);
  auto store = OpenStore(dir);
  std::vector<int> tokens(kBs);
  std::vector<std::byte> kv(kKvBytes);
  EXPECT_EQ(store->Read(b.hash, tokens, kv).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(BlockFiles(dir).empty());
}

TEST(KvDiskStoreTest, ALinkUnderABlocksNameIsNotFollowed) {
  const std::string dir = testing::TempDir() + "/kv";
  std::string name;
  {
    auto store = OpenStore(dir);
    Write(*store, MakeBlock(10));
    name = BlockFiles(dir).at(0);
  }
  // The block's bytes elsewhere, and a link to them under its name.
  std::filesystem::rename(dir + "/" + name, dir + "/../elsewhere");
  std::filesystem::create_symlink(dir + "/../elsewhere", dir + "/" + name);
  auto store = OpenStore(dir);
  EXPECT_EQ(store->num_files(), 0);
  EXPECT_TRUE(BlockFiles(dir).empty());
  EXPECT_TRUE(std::filesystem::exists(dir + "/../elsewhere")) << "the link went, not its target";
}

TEST(KvDiskStoreTest, OneLiveStorePerDirectory) {
  const std::string dir = testing::TempDir() + "/kv";
  auto first = OpenStore(dir);
  absl::StatusOr<std::unique_ptr<KvDiskStore>> second = KvDiskStore::Open(dir, Space(), 1 << 20);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              ::testing::HasSubstr(absl::StrCat("in use by another worker (pid ", getpid())));
  first.reset();
  EXPECT_TRUE(KvDiskStore::Open(dir, Space(), 1 << 20).ok()) << "free once the first is gone";
}

}  // namespace
}  // namespace pagoda
