#include "worker/worker_engine.h"

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

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

}  // namespace
}  // namespace pagoda
