// The prefill's own outputs through the real scheduler and worker (Engine over an in-process
// WorkerEngine): prompt log probabilities against the float64 reference's log-softmax, and
// embeddings, batched and alone.
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "router/core/engine.h"
#include "tests/common/model/reference_model.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/worker_engine.h"

namespace pagoda {
namespace {

// A stories260K engine with small steps: 16 tokens and 4 logit rows per step, so a prompt's
// log probabilities take many chunks and the logit-row bound cuts them.
class PrefillOutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    weights_ = *w;
    Start(/*prefix_caching=*/true);
  }

  void Start(bool prefix_caching) {
    WorkerOptions wo;
    wo.num_blocks = 64;
    wo.max_num_batched_tokens = 16;
    wo.max_num_seqs = 4;
    auto worker = WorkerEngine::Create(weights_, wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    executor_ = std::make_unique<InProcessExecutor>(*std::move(worker));
    EngineOptions eo;
    eo.max_num_batched_tokens = 16;
    eo.enable_prefix_caching = prefix_caching;
    eo.max_model_len = 256;
    engine_ = std::make_unique<Engine>(weights_.config, executor_.get(), eo);
  }

  // Runs the engine until every request finished; the updates by request id.
  std::map<int64_t, std::vector<SequenceUpdate>> RunAll() {
    std::map<int64_t, std::vector<SequenceUpdate>> out;
    while (engine_->has_unfinished()) {
      auto updates = engine_->Step();
      EXPECT_TRUE(updates.ok()) << updates.status();
      if (!updates.ok()) break;
      for (SequenceUpdate& u : *updates) out[u.request_id].push_back(std::move(u));
    }
    return out;
  }

  // The reference's log-softmax of row `pos` at `token`.
  static double RefLogprob(const std::vector<double>& logits, int vocab, int pos, int token) {
    const double* row = &logits[static_cast<size_t>(pos) * vocab];
    double max = row[0];
    for (int i = 1; i < vocab; ++i) max = std::max(max, row[i]);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] - max);
    return row[token] - max - std::log(sum);
  }

  static std::vector<int> Prompt() {
    std::vector<int> ids;
    for (const testing::GoldenCase& c : testing::LoadGoldenCases()) {
      ids.insert(ids.end(), c.prompt_ids.begin(), c.prompt_ids.end());
    }
    ids.resize(std::min<size_t>(ids.size(), 60));
    return ids;
  }

  ModelWeights weights_;
  std::unique_ptr<InProcessExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PrefillOutputsTest, PromptLogprobsEqualTheReferenceLogSoftmaxAtEachPosition) {
  const std::vector<int> prompt = Prompt();
  ASSERT_GT(prompt.size(), 40u);
  const int vocab = weights_.config.vocab_size;
  // A request without them first: its blocks are cached, and must not be used to skip the
  // positions the second one asks for.
  GenerationRequest plain;
  plain.prompt_ids = prompt;
  plain.max_tokens = 1;
  ASSERT_TRUE(engine_->AddRequest(0, plain).ok());
  RunAll();
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0;
  r.sampling.prompt_logprobs = 3;
  r.max_tokens = 2;
  ASSERT_TRUE(engine_->AddRequest(1, r).ok());
  auto updates = RunAll();
  ASSERT_FALSE(updates[1].empty());
  const SequenceUpdate& first = updates[1].front();
  ASSERT_NE(first.prompt_logprobs, nullptr);
  EXPECT_EQ(first.num_cached_tokens, 0);
  const PromptLogprobs& p = *first.prompt_logprobs;
  ASSERT_EQ(p.first_position, 1);
  ASSERT_EQ(p.logprobs.size(), prompt.size() - 1);
  ASSERT_EQ(p.top.size(), 3 * p.logprobs.size());
  const std::vector<double> ref = testing::ReferenceLogits(weights_, prompt);
  for (size_t pos = 1; pos < prompt.size(); ++pos) {
    const size_t k = pos - 1;
    EXPECT_NEAR(p.logprobs[k], RefLogprob(ref, vocab, static_cast<int>(k), prompt[pos]), 1e-4)
        << "position " << pos;
    // The alternatives: the most likely first, each its own log probability.
    for (int j = 0; j < 3; ++j) {
      const TokenLogprob& t = p.top[k * 3 + j];
      EXPECT_NEAR(t.logprob, RefLogprob(ref, vocab, static_cast<int>(k), t.token_id), 1e-4);
      if (j > 0) {
        EXPECT_GE(p.top[k * 3 + j - 1].logprob, t.logprob);
      }
    }
    EXPECT_EQ(p.ranks[k] == 1, p.top[k * 3].token_id == prompt[pos]) << "position " << pos;
  }
  // Only the first update carries them; the output goes on as asked.
  for (size_t i = 1; i < updates[1].size(); ++i) EXPECT_EQ(updates[1][i].prompt_logprobs, nullptr);
  EXPECT_TRUE(updates[1].back().finished);
}

// lm-evaluation-harness's log-likelihood request: context + continuation, max_tokens 0; the
// continuation's summed log probability is the reference's.
TEST_F(PrefillOutputsTest, MaxTokensZeroGivesAContinuationsLogLikelihood) {
  const std::vector<int> prompt = Prompt();
  const size_t context = 30;
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.prompt_logprobs = 0;
  r.max_tokens = 0;
  ASSERT_TRUE(engine_->AddRequest(7, r).ok());
  auto updates = RunAll();
  ASSERT_EQ(updates[7].size(), 1u);
  const SequenceUpdate& u = updates[7][0];
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(u.token_ids.empty());
  ASSERT_NE(u.prompt_logprobs, nullptr);
  ASSERT_EQ(u.prompt_logprobs->logprobs.size(), prompt.size() - 1);
  EXPECT_TRUE(u.prompt_logprobs->top.empty());
  const std::vector<double> ref = testing::ReferenceLogits(weights_, prompt);
  double got = 0, want = 0;
  for (size_t pos = context; pos < prompt.size(); ++pos) {
    got += u.prompt_logprobs->logprobs[pos - 1];
    want += RefLogprob(ref, weights_.config.vocab_size, static_cast<int>(pos - 1), prompt[pos]);
  }
  EXPECT_NEAR(got, want, 1e-3);
  // Its blocks are free again.
  EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(), 0);
}

TEST_F(PrefillOutputsTest, MaxTokensZeroNeedsPromptLogprobs) {
  GenerationRequest r;
  r.prompt_ids = Prompt();
  r.max_tokens = 0;
  const absl::Status s = engine_->AddRequest(1, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  r.sampling.prompt_logprobs = 21;
  EXPECT_EQ(engine_->AddRequest(1, r).code(), absl::StatusCode::kInvalidArgument);
}

// Each input's vector equals the one it gets alone, whatever it is batched with (chunks of
// other inputs, a generating sequence), for both poolings; vectors are unit length.
TEST_F(PrefillOutputsTest, EmbeddingsOfABatchEqualEachEmbeddedAlone) {
  const std::vector<int> prompt = Prompt();
  const std::vector<std::vector<int>> inputs = {
      std::vector<int>(prompt.begin(), prompt.begin() + 5),
      std::vector<int>(prompt.begin(), prompt.begin() + 37),
      std::vector<int>(prompt.begin() + 10, prompt.end()),
      {prompt[3]},
  };
  for (Pooling pooling : {Pooling::kLast, Pooling::kMean}) {
    std::vector<std::vector<float>> alone, batched(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      GenerationRequest r;
      r.prompt_ids = inputs[i];
      r.pooling = pooling;
      ASSERT_TRUE(engine_->AddRequest(100 + i, r).ok());
      auto updates = RunAll();
      ASSERT_EQ(updates[100 + i].size(), 1u);
      alone.push_back(updates[100 + i][0].embedding);
      EXPECT_EQ(updates[100 + i][0].num_prompt_tokens, static_cast<int>(inputs[i].size()));
    }
    GenerationRequest gen;
    gen.prompt_ids = prompt;
    gen.max_tokens = 8;
    ASSERT_TRUE(engine_->AddRequest(99, gen).ok());
    for (size_t i = 0; i < inputs.size(); ++i) {
      GenerationRequest r;
      r.prompt_ids = inputs[i];
      r.pooling = pooling;
      ASSERT_TRUE(engine_->AddRequest(200 + i, r).ok());
    }
    auto updates = RunAll();
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(updates[200 + i].size(), 1u);
      EXPECT_TRUE(updates[200 + i][0].finished);
      batched[i] = updates[200 + i][0].embedding;
      ASSERT_EQ(batched[i].size(), static_cast<size_t>(weights_.config.dim));
      ASSERT_EQ(alone[i].size(), batched[i].size());
      double norm = 0;
      for (size_t d = 0; d < batched[i].size(); ++d) {
        EXPECT_NEAR(batched[i][d], alone[i][d], 1e-5) << "input " << i << " dim " << d;
        norm += batched[i][d] * batched[i][d];
      }
      EXPECT_NEAR(norm, 1.0, 1e-5);
    }
    EXPECT_NE(alone[0], alone[1]);
    EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(), 0);  // no KV kept after
  }
}

TEST_F(PrefillOutputsTest, AnEmbeddingRequestIsRefusedWithGenerationFields) {
  GenerationRequest r;
  r.prompt_ids = Prompt();
  r.pooling = Pooling::kMean;
  r.n = 2;
  EXPECT_EQ(engine_->AddRequest(1, r).code(), absl::StatusCode::kInvalidArgument);
  r.n = 1;
  r.max_tokens = 3;
  EXPECT_EQ(engine_->AddRequest(1, r).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda
