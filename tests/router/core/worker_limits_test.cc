#include "router/core/worker_limits.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

WorkerInfo Info() {
  return {.model_fingerprint = "m",
          .num_blocks = 8,
          .block_size = 2,
          .max_num_batched_tokens = 64,
          .max_num_seqs = 4,
          .kv_cache_dtype = "f32"};
}

std::string Refusal(const std::vector<CachedBlock>& cached) {
  return std::string(ValidateCachedBlocks(cached, Info(), /*vocab_size=*/10).message());
}

TEST(WorkerLimitsTest, WellFormedCachedBlocksPass) {
  EXPECT_TRUE(ValidateCachedBlocks(std::vector<CachedBlock>(), Info(), 10).ok());
  const std::vector<CachedBlock> tree = {{.block = 7, .parent = -1, .tokens = {0, 9}},
                                         {.block = 0, .parent = 0, .tokens = {1, 2}},
                                         {.block = 3, .parent = 0, .tokens = {1, 3}}};
  EXPECT_TRUE(ValidateCachedBlocks(tree, Info(), 10).ok());
}

TEST(WorkerLimitsTest, MalformedCachedBlocksAreRefusedByField) {
  EXPECT_THAT(Refusal({{.block = 8, .parent = -1, .tokens = {0, 1}}}),
              HasSubstr("cached_blocks[0].block"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = -1, .tokens = {0, 1}},
                       {.block = 1, .parent = -1, .tokens = {0, 1}}}),
              HasSubstr("cached_blocks[1].block"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = 0, .tokens = {0, 1}}}),
              HasSubstr("cached_blocks[0].parent"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = -2, .tokens = {0, 1}}}),
              HasSubstr("cached_blocks[0].parent"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = -1, .tokens = {0}}}),
              HasSubstr("cached_blocks[0].tokens"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = -1, .tokens = {0, 10}}}),
              HasSubstr("cached_blocks[0].tokens"));
  EXPECT_THAT(Refusal({{.block = 1, .parent = -1, .tokens = {-1, 0}}}),
              HasSubstr("cached_blocks[0].tokens"));
  std::vector<CachedBlock> too_many(9, {.block = 0, .parent = -1, .tokens = {0, 1}});
  EXPECT_THAT(Refusal(too_many), HasSubstr("Hello.cached_blocks: 9 blocks"));
}

}  // namespace
}  // namespace pagoda
