#include "worker/worker_engine.h"

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

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

TEST(WorkerEngineTest, KvCacheDtypeIsAutoF32Bf16OrF16) {
  EXPECT_EQ(ParseKvCacheDtype("auto").value(), KvDtype::kF32);  // 16-bit K/V are asked for
  EXPECT_EQ(ParseKvCacheDtype("f32").value(), KvDtype::kF32);
  EXPECT_EQ(ParseKvCacheDtype("bf16").value(), KvDtype::kBf16);
  EXPECT_EQ(ParseKvCacheDtype("f16").value(), KvDtype::kF16);
  for (const char* bad : {"", "fp16", "BF16", "float32", "int8", "bf16 "}) {
    const absl::StatusOr<KvDtype> dtype = ParseKvCacheDtype(bad);
    ASSERT_FALSE(dtype.ok()) << bad;
    EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(WorkerEngineTest, ASixteenBitPoolHoldsTwiceTheBlocksInTheSameBytes) {
  int num_blocks[3] = {};
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16}) {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    WorkerOptions options;
    options.kv_cache_bytes = 100 * KvPool::BytesPerBlock(w->config, options.block_size);  // f32
    options.kv_cache_dtype = dtype;
    options.max_num_batched_tokens = 16;
    options.max_num_seqs = 4;
    auto engine = WorkerEngine::Create(*std::move(w), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    num_blocks[static_cast<int>(dtype)] = (*engine)->info().num_blocks;
    EXPECT_EQ((*engine)->info().kv_cache_dtype, KvDtypeName(dtype));  // what Hello announces
  }
  EXPECT_EQ(num_blocks[0], 100);
  EXPECT_EQ(num_blocks[1], 200);
  EXPECT_EQ(num_blocks[2], 200);
}

TEST(WorkerEngineTest, MemAvailableIsReadFromProc) { EXPECT_GT(MemAvailableBytes(), 0); }

}  // namespace
}  // namespace pagoda
