// --kv-cache-dtype through real processes: a 16-bit worker announces twice the blocks of an
// f32 one with the same --kv-cache-mb (the router's capacity is its count of blocks), serves,
// and a bad value stops the worker with exit code 2.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST_F(ServingTest, ABf16WorkerHoldsTwiceTheBlocksOfAnF32OneInTheSameMemory) {
  StartWorker("", {"--kv-cache-dtype=bf16"});  // --kv-cache-mb=8, as every test worker
  WaitForWorkers(1);
  const int64_t bf16_blocks = Info().num_blocks();
  EXPECT_THAT(testing::ReadFile(dir_ + "/worker0.log"), HasSubstr("KV pool: bf16, "));
  // Alone, it serves the request.
  const testing::StreamOutput out = Generate(Greedy(golden_[0].prompt));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_FALSE(out.ids[0].empty());

  StartWorker();
  WaitForWorkers(2);
  const int64_t f32_blocks = Info().num_blocks() - bf16_blocks;
  EXPECT_THAT(testing::ReadFile(dir_ + "/worker1.log"), HasSubstr("KV pool: f32, "));
  ASSERT_GT(f32_blocks, 0);
  EXPECT_GE(bf16_blocks, 1.9 * f32_blocks) << bf16_blocks << " vs " << f32_blocks;
}

TEST_F(ServingTest, ABadKvCacheDtypeStopsTheWorkerWithExitCode2) {
  const pid_t pid = StartWorker("", {"--kv-cache-dtype=fp8"});
  EXPECT_EQ(ExitCode(pid), 2);
  EXPECT_THAT(testing::ReadFile(dir_ + "/worker0.log"),
              HasSubstr("--kv-cache-dtype=fp8: expected auto, f32, bf16 or f16"));
}

}  // namespace
}  // namespace pagoda
