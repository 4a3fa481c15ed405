#include "worker/llama_model.h"

#include <map>
#include <string>

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "router/core/engine.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/kernels/isa.h"

namespace pagoda {
namespace {

// Each test runs once per kernel table this CPU has; the model is built for that table.
class LlamaModelTest : public ::testing::TestWithParam<const Kernels*> {
 protected:
  void SetUp() override { previous_ = SetActiveKernelsForTesting(GetParam()); }
  void TearDown() override { SetActiveKernelsForTesting(previous_); }
  const Kernels* previous_ = nullptr;
};

TEST_P(LlamaModelTest, LogitsAfterBosMatchRunC) {
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

// run.c's greedy continuations, all prompts in one continuous batch (steps of up to all six
// decodes plus prefill chunks: every row count of the GEMM tile).
TEST_P(LlamaModelTest, GreedyIdsMatchRunCInOneBatch) {
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig config = w->config;
  WorkerOptions wo;
  wo.num_blocks = 256;
  wo.max_num_batched_tokens = 64;
  auto worker = WorkerEngine::Create(*std::move(w), wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  InProcessExecutor executor(*std::move(worker));
  EngineOptions eo;
  eo.max_num_batched_tokens = 64;  // long prompts go in chunks beside the decodes
  eo.max_model_len = 257;
  Engine engine(config, &executor, eo);
  std::map<int64_t, std::vector<int>> outputs;
  std::vector<int64_t> ids;
  for (const auto& c : golden) {
    GenerationRequest r;
    r.prompt_ids = c.prompt_ids;
    r.sampling.temperature = 0;
    ids.push_back(static_cast<int64_t>(ids.size()));
    const absl::Status added = engine.AddRequest(ids.back(), r);
    ASSERT_TRUE(added.ok()) << added;
  }
  while (engine.has_unfinished()) {
    auto updates = engine.Step();
    ASSERT_TRUE(updates.ok()) << updates.status();
    for (const SequenceUpdate& u : *updates) {
      for (int t : u.token_ids) outputs[u.request_id].push_back(t);
    }
  }
  for (size_t i = 0; i < golden.size(); ++i) {
    EXPECT_EQ(outputs[ids[i]], golden[i].greedy_ids)
        << GetParam()->name << ": " << golden[i].prompt;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, LlamaModelTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace pagoda
