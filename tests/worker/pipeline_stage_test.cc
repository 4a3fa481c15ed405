// Pipeline stages (issue 40), the model's side: a LlamaModel over a range of layers. A chain of
// stages, each with the K/V of its own layers only, each handing its residual stream to the
// next, computes the whole model's logits bit for bit (tied and untied embeddings, 2 and 3
// stages, a batched prefill and then decodes over the cache); each stage holds only its own
// weights; ranges outside the model are refused by name.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/layer_range.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/llama_model.h"

// Its own namespace: the unity build compiles it with other tests' file-local helpers.
namespace pagoda::stage_test {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 16;
constexpr int kMaxTokens = 64;
constexpr int kMaxLogitRows = 8;

// stories260K's real weights (tied embeddings), or a random stories260K-shaped model with its
// own classifier.
ModelWeights Weights(bool tied) {
  if (tied) {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    CHECK(w.ok()) << w.status();
    CHECK(w->config.tied_embeddings);
    return *std::move(w);
  }
  ModelConfig c;
  CHECK(NamedModelConfig("stories260K", &c));
  c.tied_embeddings = false;
  return RandomModelWeights(c, 5);
}

std::unique_ptr<LlamaModel> Model(ModelWeights w, std::optional<LayerRange> layers) {
  absl::StatusOr<std::unique_ptr<WeightSource>> source = WeightSource::FromWeights(std::move(w));
  CHECK(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Create(
      **source, kMaxTokens, kMaxLogitRows, [](GgmlType) { return WeightDtype::kF32; },
      ComputeDtype::kF32, nullptr, layers);
  CHECK(model.ok()) << model.status();
  return *std::move(model);
}

// A pool of `layers` layers of the model.
KvPool Pool(const ModelConfig& config, int layers) {
  ModelConfig c = config;
  c.num_layers = layers;
  return KvPool(c, 8, kBlockSize);
}

// Two sequences (blocks 0-1 and 2-3): a step prefilling both prompts, then `decodes` steps of
// one token each, every row's logits wanted. Each step's ForwardBatch.
struct Steps {
  std::vector<std::vector<int>> tokens, positions;
  std::vector<std::vector<int64_t>> slots;
  std::vector<std::vector<AttentionSequence>> seqs;
  std::vector<std::vector<int>> logit_rows;
  int block_tables[2][2] = {{0, 1}, {2, 3}};

  Steps(const std::vector<int>& a, const std::vector<int>& b, int decodes) {
    const std::vector<int>* prompts[2] = {&a, &b};
    int length[2] = {0, 0};
    for (int step = 0; step <= decodes; ++step) {
      std::vector<int>& t = tokens.emplace_back();
      std::vector<int>& p = positions.emplace_back();
      std::vector<int64_t>& s = slots.emplace_back();
      std::vector<AttentionSequence>& q = seqs.emplace_back();
      std::vector<int>& rows = logit_rows.emplace_back();
      for (int i = 0; i < 2; ++i) {
        const int n = step == 0 ? static_cast<int>(prompts[i]->size()) : 1;
        const int first_row = static_cast<int>(t.size());
        for (int j = 0; j < n; ++j) {
          const int pos = length[i] + j;
          t.push_back(step == 0 ? (*prompts[i])[j] : 3 + 7 * step + i);
          p.push_back(pos);
          s.push_back(int64_t{block_tables[i][pos / kBlockSize]} * kBlockSize + pos % kBlockSize);
        }
        length[i] += n;
        q.push_back({first_row, n, length[i] - n, block_tables[i]});
        rows.push_back(static_cast<int>(t.size()) - 1);
      }
    }
  }
  ForwardBatch Batch(size_t step, const float* hidden_in) const {
    ForwardBatch b{tokens[step], positions[step], slots[step], seqs[step], logit_rows[step]};
    b.hidden_in = hidden_in;
    return b;
  }
};

struct Split {
  bool tied;
  std::vector<LayerRange> stages;
};

class PipelineStageTest : public ::testing::TestWithParam<Split> {};

TEST_P(PipelineStageTest, ChainedStagesComputeTheWholeModelsLogitsBitForBit) {
  const Split& split = GetParam();
  const std::unique_ptr<LlamaModel> whole = Model(Weights(split.tied), std::nullopt);
  const ModelConfig& c = whole->config();
  ASSERT_EQ(c.num_layers, 5);
  KvPool whole_kv = Pool(c, c.num_layers);
  std::vector<std::unique_ptr<LlamaModel>> stages;
  std::vector<KvPool> pools;
  for (const LayerRange& r : split.stages) {
    stages.push_back(Model(Weights(split.tied), r));
    pools.push_back(Pool(c, r.size()));
    EXPECT_EQ(stages.back()->layers(), r);
  }

  const Steps steps({1, 403, 407, 261, 378, 410, 261, 380, 289, 271, 310, 18, 1},
                    {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57}, 4);
  for (size_t step = 0; step < steps.tokens.size(); ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int rows = static_cast<int>(steps.tokens[step].size());
    const float* expected = whole->Forward(steps.Batch(step, nullptr), whole_kv);
    std::vector<float> hidden;
    const float* logits = nullptr;
    for (size_t s = 0; s < stages.size(); ++s) {
      logits =
          stages[s]->Forward(steps.Batch(step, hidden.empty() ? nullptr : hidden.data()), pools[s]);
      if (s + 1 < stages.size()) {
        EXPECT_EQ(logits, nullptr) << "stage " << s << " has no classifier";
        // What crosses to the next stage: (T, dim) floats.
        hidden.assign(stages[s]->residual(), stages[s]->residual() + rows * c.dim);
      }
    }
    ASSERT_NE(logits, nullptr);
    const size_t n = steps.logit_rows[step].size() * c.vocab_size;
    EXPECT_EQ(std::memcmp(logits, expected, n * sizeof(float)), 0) << "logits differ";
  }
}

TEST_P(PipelineStageTest, EachStageHoldsOnlyItsOwnWeights) {
  const Split& split = GetParam();
  const std::unique_ptr<LlamaModel> whole = Model(Weights(split.tied), std::nullopt);
  const ModelConfig& c = whole->config();
  const size_t embedding = sizeof(float) * c.vocab_size * c.dim;
  size_t sum = 0;
  for (const LayerRange& r : split.stages) {
    const std::unique_ptr<LlamaModel> stage = Model(Weights(split.tied), r);
    EXPECT_LT(stage->weight_bytes(), whole->weight_bytes()) << r.ToString();
    EXPECT_EQ(stage->holds_first_layer(), r.begin == 0);
    EXPECT_EQ(stage->holds_last_layer(), r.end == c.num_layers);
    sum += stage->weight_bytes();
  }
  // Each layer once; the first stage's embedding and the last's classifier are one matrix in
  // the whole model when tied.
  EXPECT_EQ(sum, whole->weight_bytes() + (split.tied ? embedding : 0));
}

INSTANTIATE_TEST_SUITE_P(Splits, PipelineStageTest,
                         ::testing::Values(Split{true, {{0, 2}, {2, 5}}},
                                           Split{false, {{0, 2}, {2, 5}}},
                                           Split{true, {{0, 1}, {1, 4}, {4, 5}}},
                                           Split{false, {{0, 3}, {3, 4}, {4, 5}}}),
                         [](const ::testing::TestParamInfo<Split>& info) {
                           std::string name = info.param.tied ? "Tied" : "Untied";
                           for (const LayerRange& r : info.param.stages)
                             absl::StrAppend(&name, "_", r.begin, r.end);
                           return name;
                         });

TEST(LayerRangeTest, ParsesAToBAndRefusesTheRest) {
  absl::StatusOr<LayerRange> r = ParseLayerRange("0:16");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (LayerRange{0, 16}));
  EXPECT_TRUE(r->first());
  EXPECT_TRUE(r->last(16));
  EXPECT_FALSE(r->last(32));
  EXPECT_EQ(ParseLayerRange("16:32")->ToString(), "16:32");
  for (const char* bad : {"", "3", "2:2", "3:2", "-1:2", "a:b", "1:2:3", "0:", ":4", "0:1e3"}) {
    const absl::StatusOr<LayerRange> refused = ParseLayerRange(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("must be A:B, 0 <= A < B")) << bad;
  }
}

TEST(LayerRangeTest, AModelRefusesLayersItDoesNotHave) {
  absl::StatusOr<std::unique_ptr<WeightSource>> source = WeightSource::FromWeights(Weights(true));
  ASSERT_TRUE(source.ok());
  const absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Create(
      **source, kMaxTokens, kMaxLogitRows, [](GgmlType) { return WeightDtype::kF32; },
      ComputeDtype::kF32, nullptr, LayerRange{3, 6});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(),
              HasSubstr("layers 3:6 are not within the model's 5 layers (0:5)"));
}

}  // namespace
}  // namespace pagoda::stage_test
