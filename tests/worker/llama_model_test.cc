#include "worker/llama_model.h"

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

TEST(LlamaModelTest, LogitsAfterBosMatchRunC) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  auto model = LlamaModel::Create(*std::move(w), 16, 4);
  ASSERT_TRUE(model.ok()) << model.status();
  KvPool kv((*model)->config(), 4, 16);
  const int tokens[] = {1};
  const int positions[] = {0};
  const int64_t slots[] = {2 * 16};  // block 2, offset 0
  const int block_table[] = {2};
  const AttentionSequence seqs[] = {{0, 1, 0, block_table}};
  const int logit_rows[] = {0};
  const float* logits = (*model)->Forward({tokens, positions, slots, seqs, logit_rows}, kv);
  // From ../shared/models/stories260K/SOURCE.md: run.c's logits for ids 0..7 after BOS.
  const float expected[] = {-6.222911f, 8.404342f,  -6.223737f, -6.222542f,
                            -6.221951f, -6.222875f, -6.221880f, -6.223416f};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(logits[i], expected[i], 1e-4) << "id " << i;
}

}  // namespace
}  // namespace pagoda
