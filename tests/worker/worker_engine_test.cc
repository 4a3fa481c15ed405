#include "worker/worker_engine.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(WorkerEngineTest, AutoKvSizeIsTheMemoryShareCappedAtWhatTheSequencesCanUse) {
  // Half of 8 GiB, when the sequences could use more.
  EXPECT_EQ(AutoKvCacheBytes(8LL << 30, 0.5, 1 << 10, 1 << 30), 4LL << 30);
  // 256 sequences of 512 tokens of 1 KiB: 128 MiB, though 4 GiB would be free for it.
  EXPECT_EQ(AutoKvCacheBytes(8LL << 30, 0.5, 1 << 10, 256 * 512), 128LL << 20);
  EXPECT_EQ(AutoKvCacheBytes(0, 0.5, 1 << 10, 100), 0);  // unknown memory: no pool, an error
}

TEST(WorkerEngineTest, KvCacheMbIsAutoOrAPositiveSize) {
  EXPECT_EQ(ParseKvCacheMb("auto").value(), 0);
  EXPECT_EQ(ParseKvCacheMb("256").value(), 256LL << 20);
  for (const char* bad : {"0", "-5", "lots", "", "12MB"}) {
    EXPECT_FALSE(ParseKvCacheMb(bad).ok()) << bad;
  }
}

TEST(WorkerEngineTest, MemAvailableIsReadFromProc) { EXPECT_GT(MemAvailableBytes(), 0); }

}  // namespace
}  // namespace pagoda
