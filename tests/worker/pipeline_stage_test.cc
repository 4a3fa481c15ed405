// Pipeline stages (issue 40), the worker's side. A LlamaModel over a range of layers: a chain
// of stages, each with the K/V of its own layers only, each handing its residual stream to the
// next, computes the whole model's logits bit for bit (tied and untied embeddings, 2 and 3
// stages, a batched prefill and then decodes over the cache); each stage holds only its own
// weights; ranges outside the model are refused by name. WorkerEngines as stages of one
// StageGroup, their activations crossing by mailbox, driven by the router's Engine: run.c's
// greedy tokens, and a whole worker's tokens when sampled with seeds, preempted, and with
// drafts.
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/model/layer_range.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/engine.h"
#include "router/core/stage_group.h"
#include "router/core/stage_slice.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/llama_model.h"
#include "worker/stage_link.h"
#include "worker/stage_mailbox.h"
#include "worker/worker_engine.h"

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

// Stage i's link to its neighbours in one process: it takes from its own mailbox and puts
// into stage i+1's.
class MailboxLink final : public StageLink {
 public:
  MailboxLink(StageMailbox* in, StageMailbox* out) : in_(in), out_(out) {}
  absl::Status Receive(int64_t step_id, std::span<float> out) override {
    return in_->Take(step_id, out, absl::Seconds(60));
  }
  absl::Status Send(int64_t step_id, std::span<const float> hidden) override {
    out_->Put(step_id, std::vector<float>(hidden.begin(), hidden.end()));
    return absl::OkStatus();
  }

 private:
  StageMailbox* in_;
  StageMailbox* out_;
};

// A model's workers: one whole, or a group of stages (their engines in this process, their
// activations crossing by mailbox) behind one Executor.
struct Workers {
  std::vector<std::unique_ptr<StageMailbox>> mailboxes;
  std::vector<std::shared_ptr<InProcessExecutor>> stages;
  std::unique_ptr<Executor> group;

  Workers(const std::vector<LayerRange>& ranges, const WorkerOptions& options) {
    for (size_t i = 0; i <= ranges.size(); ++i) {
      mailboxes.push_back(std::make_unique<StageMailbox>());
    }
    std::vector<std::shared_ptr<Executor>> executors;
    for (size_t i = 0; i < ranges.size(); ++i) {
      WorkerOptions o = options;
      if (ranges.size() > 1) o.layers = ranges[i];
      absl::StatusOr<std::unique_ptr<WorkerEngine>> engine = WorkerEngine::Create(Weights(true), o);
      CHECK(engine.ok()) << engine.status();
      if (ranges.size() > 1) {
        (*engine)->SetStageLink(
            std::make_unique<MailboxLink>(mailboxes[i].get(), mailboxes[i + 1].get()));
      }
      stages.push_back(std::make_shared<InProcessExecutor>(*std::move(engine)));
      executors.push_back(stages.back());
    }
    absl::StatusOr<std::unique_ptr<StageGroup>> g = StageGroup::Create(executors, 5);
    CHECK(g.ok()) << g.status();
    group = *std::move(g);
  }
};

// Runs run.c's golden prompts, all in one continuous batch, through `executor`: greedy, or
// sampled with a seed per request; with drafts when `speculative`. The tokens of each. With
// `parts`, only the prompts i with i % parts == part (the others' tokens stay empty).
std::vector<std::vector<int>> Serve(Executor* executor, bool sampled, bool speculative,
                                    size_t part = 0, size_t parts = 1) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  CHECK(w.ok());
  EngineOptions eo;
  eo.max_num_batched_tokens = 48;  // prompts in chunks beside the decodes
  eo.max_model_len = 257;
  if (speculative) eo.speculative.method = SpeculativeMethod::kNgram;
  Engine engine(w->config, executor, eo);
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  for (size_t i = part; i < golden.size(); i += parts) {
    GenerationRequest r;
    r.prompt_ids = golden[i].prompt_ids;
    r.sampling.temperature = sampled ? 0.8f : 0.0f;
    r.sampling.seed = 100 + i;
    r.stop_token_ids = {1};  // run.c stops at BOS
    const absl::Status added = engine.AddRequest(static_cast<int64_t>(i), r);
    CHECK(added.ok()) << added;
  }
  std::vector<std::vector<int>> out(golden.size());
  while (engine.has_unfinished()) {
    absl::StatusOr<std::vector<SequenceUpdate>> updates = engine.Step();
    CHECK(updates.ok()) << updates.status();
    for (const SequenceUpdate& u : *updates) {
      out[u.request_id].insert(out[u.request_id].end(), u.token_ids.begin(), u.token_ids.end());
    }
  }
  return out;
}

WorkerOptions GroupOptions(int num_blocks) {
  WorkerOptions o;
  o.num_blocks = num_blocks;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 16;
  return o;
}

class StageGroupServingTest : public ::testing::TestWithParam<std::vector<LayerRange>> {};

// Greedy: run.c's tokens, from 2 and 3 stages as from one whole worker.
TEST_P(StageGroupServingTest, ServesRunCsGreedyTokens) {
  Workers group(GetParam(), GroupOptions(128));
  const std::vector<std::vector<int>> out = Serve(group.group.get(), false, false);
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  for (size_t i = 0; i < golden.size(); ++i) EXPECT_EQ(out[i], golden[i].greedy_ids) << i;
}

// Seeded sampling, a pool small enough that sequences are preempted and recomputed, and
// drafts verified: the same tokens as one whole worker under the same schedule.
TEST_P(StageGroupServingTest, MatchesAWholeWorkerSampledPreemptedAndWithDrafts) {
  for (const bool speculative : {false, true}) {
    SCOPED_TRACE(speculative ? "with drafts" : "without drafts");
    Workers whole({{0, 5}}, GroupOptions(24));
    Workers group(GetParam(), GroupOptions(24));
    EXPECT_EQ(Serve(group.group.get(), true, speculative),
              Serve(whole.group.get(), true, speculative));
  }
}

// Micro-batches: the group split into a slice per stage, each slice driven by an Engine of its
// own on a thread of its own (as the Cluster runs each slice's loop), each over its share of
// run.c's prompts, all at once: run.c's tokens.
TEST_P(StageGroupServingTest, ItsSlicesServeRunCsGreedyTokensAtOnce) {
  Workers group(GetParam(), GroupOptions(128));
  std::shared_ptr<StageGroup> shared(static_cast<StageGroup*>(group.group.release()));
  const std::vector<std::shared_ptr<StageSlice>> slices = StageSlice::Split(shared, 257);
  ASSERT_EQ(slices.size(), GetParam().size());
  std::vector<std::vector<std::vector<int>>> outs(slices.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < slices.size(); ++i) {
    threads.emplace_back(
        [&, i] { outs[i] = Serve(slices[i].get(), false, false, i, slices.size()); });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  for (size_t i = 0; i < golden.size(); ++i) {
    EXPECT_EQ(outs[i % slices.size()][i], golden[i].greedy_ids) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, StageGroupServingTest,
                         ::testing::Values(std::vector<LayerRange>{{0, 2}, {2, 5}},
                                           std::vector<LayerRange>{{0, 1}, {1, 3}, {3, 5}}),
                         [](const ::testing::TestParamInfo<std::vector<LayerRange>>& info) {
                           return absl::StrCat(info.param.size(), "Stages");
                         });

// A stage without its link refuses a step with tokens rather than compute garbage.
TEST(StageGroupTest, AStageWithoutItsLinkRefusesSteps) {
  WorkerOptions o = GroupOptions(16);
  o.layers = LayerRange{2, 5};
  absl::StatusOr<std::unique_ptr<WorkerEngine>> engine = WorkerEngine::Create(Weights(true), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->info().layer_begin, 2);
  EXPECT_EQ((*engine)->info().layer_end, 5);
  StepCommand step;
  step.step_id = 1;
  NewSequence& n = step.new_sequences.emplace_back();
  n.seq_id = 7;
  n.prompt_ids = {1, 2, 3};
  ScheduledSequence& s = step.scheduled.emplace_back();
  s.seq_id = 7;
  s.token_ids = {1, 2, 3};
  s.new_block_ids = {0};
  s.sample = true;
  const absl::StatusOr<StepResult> r = (*engine)->Execute(step);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("a stage of layers 2:5 has no link"));
}

}  // namespace
}  // namespace pagoda::stage_test
