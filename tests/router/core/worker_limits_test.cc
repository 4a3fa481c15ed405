#include "router/core/worker_limits.h"

#include <string>
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

// Issue 39: a Hello's LoRA adapters come off the wire: bounded in count, names plain and short.
TEST(WorkerLimitsTest, AHellosAdaptersAreBoundedAndPlain) {
  WorkerInfo info = Info();
  info.adapters = {{.name = "sql-lora", .rank = 16, .digest = "0123abcd"},
                   {.name = "org/chat.v2:q", .rank = 256, .digest = ""}};
  info.max_loras = 4;
  info.max_cpu_loras = 8;
  EXPECT_TRUE(ValidateWorkerInfo(info, WorkerLimits()).ok());
  const std::vector<AdapterInfo> bad = {{.name = "", .rank = 8, .digest = ""},
                                        {.name = "a b", .rank = 8, .digest = ""},
                                        {.name = std::string(129, 'a'), .rank = 8, .digest = ""},
                                        {.name = "x", .rank = 0, .digest = ""},
                                        {.name = "x", .rank = 257, .digest = ""},
                                        {.name = "x", .rank = 8, .digest = std::string(65, 'f')}};
  for (const AdapterInfo& a : bad) {
    info.adapters = {a};
    EXPECT_THAT(ValidateWorkerInfo(info, WorkerLimits()).message(), HasSubstr("Hello.adapters"))
        << a.name << " " << a.rank;
  }
  info.adapters.assign(kMaxWorkerAdapters + 1, {.name = "x", .rank = 8, .digest = ""});
  EXPECT_THAT(ValidateWorkerInfo(info, WorkerLimits()).message(), HasSubstr("at most 1024"));
  info.adapters.clear();
  info.max_loras = -1;
  EXPECT_THAT(ValidateWorkerInfo(info, WorkerLimits()).message(), HasSubstr("max_loras"));
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
