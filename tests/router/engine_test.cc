// The router core and the worker engine together, in one process (the offline mode): golden
// outputs, batch invariance, preemption, prefix caching, forks and cancellation.
#include "router/engine.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/model/llama2c_checkpoint.h"
#include "common/text/llama2c_tokenizer.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

struct Result {
  std::vector<std::vector<int>> outputs;  // (n)
  std::vector<FinishReason> reasons;      // (n)
  int num_cached_tokens = 0;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = new std::vector<testing::GoldenCase>(testing::LoadGoldenCases());
  }
  static void TearDownTestSuite() { delete golden_; }

  // A fresh worker + engine with `num_blocks` KV blocks of 16 tokens.
  void Start(int num_blocks, int max_model_len = 257, int max_num_batched_tokens = 512,
             KvReservation reservation = KvReservation::kOnDemand, bool prefix_caching = true) {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    config_ = w->config;
    WorkerOptions wo;
    wo.num_blocks = num_blocks;
    wo.max_num_batched_tokens = max_num_batched_tokens;
    wo.max_num_seqs = 64;
    auto worker = WorkerEngine::Create(*std::move(w), wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    executor_ = std::make_unique<InProcessExecutor>(*std::move(worker));
    EngineOptions eo;
    eo.max_num_batched_tokens = max_num_batched_tokens;
    eo.max_num_seqs = 64;
    eo.max_model_len = max_model_len;
    eo.kv_reservation = reservation;
    eo.enable_prefix_caching = prefix_caching;
    engine_ = std::make_unique<Engine>(config_, executor_.get(), eo);
  }

  // Runs everything queued to completion, then checks that nothing leaked.
  std::map<int64_t, Result> RunAll(std::map<int64_t, Result> results = {}) {
    peak_running_ = 0;
    while (engine_->has_unfinished()) {
      if (!StepInto(results)) break;
      peak_running_ = std::max(peak_running_, engine_->scheduler().num_running());
    }
    ExpectNothingLeaked();
    return results;
  }

  // One step, its updates added to `results`.
  bool StepInto(std::map<int64_t, Result>& results) {
    auto updates = engine_->Step();
    EXPECT_TRUE(updates.ok()) << updates.status();
    if (!updates.ok()) return false;
    for (const SequenceUpdate& u : *updates) {
      {
        Result& r = results[u.request_id];
        if (static_cast<int>(r.outputs.size()) <= u.seq_index) {
          r.outputs.resize(u.seq_index + 1);
          r.reasons.resize(u.seq_index + 1);
        }
        // The queue time comes with a sequence's first token, and only then.
        EXPECT_EQ(u.queue_seconds >= 0, !u.new_token_ids.empty() &&
                                            r.outputs[u.seq_index].empty() &&
                                            u.num_output_tokens == 1)
            << "sequence " << u.seq_id;
        for (int t : u.new_token_ids) r.outputs[u.seq_index].push_back(t);
        if (u.finished) r.reasons[u.seq_index] = u.finish_reason;
        r.num_cached_tokens = u.num_cached_tokens;
      }
    }
    return true;
  }

  void ExpectNothingLeaked() {
    ASSERT_TRUE(engine_->Step().ok());  // delivers the last finished ids to the worker
    EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(), 0);
    EXPECT_EQ(executor_->engine().num_sequences(), 0);
  }

  int64_t Add(const std::vector<int>& prompt, SamplingParams sampling = Greedy(), int n = 1,
              std::optional<int> max_tokens = std::nullopt) {
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.sampling = sampling;
    r.n = n;
    r.max_tokens = max_tokens;
    absl::StatusOr<int64_t> id = engine_->AddRequest(r);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(-1);
  }

  static SamplingParams Greedy() {
    SamplingParams p;
    p.temperature = 0;
    return p;
  }
  static SamplingParams Sampled(uint64_t seed) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.seed = seed;
    return p;
  }

  // 32 distinct prompts: the golden ones and variations of them.
  std::vector<std::vector<int>> ManyPrompts() {
    auto tok = Llama2cTokenizer::Load(testing::Stories260KTokenizer());
    CHECK(tok.ok());
    const char* subjects[] = {"The cat",     "A little boy", "Tom and Sue", "The old man",
                              "A tiny bird", "Lily",         "The big dog", "Mom"};
    const char* verbs[] = {" went to the park", " saw a ball", " was very happy", " liked to sing"};
    std::vector<std::vector<int>> prompts;
    for (const char* s : subjects) {
      for (const char* v : verbs) {
        std::vector<int> ids = {1};
        for (int id : (*tok)->Encode(std::string(s) + v)) ids.push_back(id);
        prompts.push_back(ids);
      }
    }
    return prompts;
  }

  static std::vector<testing::GoldenCase>* golden_;
  int peak_running_ = 0;  // most sequences running at once in the last RunAll
  ModelConfig config_;
  std::unique_ptr<InProcessExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

std::vector<testing::GoldenCase>* EngineTest::golden_ = nullptr;

TEST_F(EngineTest, GreedyMatchesRunCAloneAndBatched) {
  Start(/*num_blocks=*/512);
  for (const auto& c : *golden_) {
    const int64_t id = Add(c.prompt_ids);
    auto results = RunAll();
    EXPECT_EQ(results[id].outputs[0], c.greedy_ids) << c.prompt;
  }
  std::vector<int64_t> ids;
  for (const auto& c : *golden_) ids.push_back(Add(c.prompt_ids));
  auto results = RunAll();
  for (size_t i = 0; i < ids.size(); ++i) {
    const Result& r = results[ids[i]];
    EXPECT_EQ(r.outputs[0], (*golden_)[i].greedy_ids) << (*golden_)[i].prompt;
    // run.c stops on BOS (a stop) or at steps_total positions (a length limit).
    EXPECT_EQ(r.reasons[0], r.outputs[0].back() == 1 ? FinishReason::kStop : FinishReason::kLength);
  }
}

TEST_F(EngineTest, ThirtyTwoPromptsTogetherGiveTheSameTokensAsOneAtATime) {
  Start(/*num_blocks=*/1024);
  const auto prompts = ManyPrompts();
  ASSERT_EQ(prompts.size(), 32u);
  std::vector<std::vector<int>> alone;
  for (const auto& p : prompts) {
    const int64_t id = Add(p, Greedy(), 1, 96);
    alone.push_back(RunAll()[id].outputs[0]);
  }
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(Add(p, Greedy(), 1, 96));
  auto together = RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]].outputs[0], alone[i]) << "prompt " << i;
  }
}

TEST_F(EngineTest, PreemptionUnderASmallPoolStillGivesTheSameTokens) {
  // Each golden sequence needs up to 16 blocks; 40 blocks cannot hold all six at once.
  std::map<int, std::vector<int>> greedy_small, sampled_small, sampled_large;
  Start(/*num_blocks=*/40);
  std::vector<int64_t> g, s;
  for (const auto& c : *golden_) g.push_back(Add(c.prompt_ids));
  for (size_t i = 0; i < golden_->size(); ++i)
    s.push_back(Add((*golden_)[i].prompt_ids, Sampled(7 + i)));
  auto small = RunAll();
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0) << "the pool was meant to be too small";
  for (size_t i = 0; i < golden_->size(); ++i) {
    EXPECT_EQ(small[g[i]].outputs[0], (*golden_)[i].greedy_ids) << (*golden_)[i].prompt;
  }

  Start(/*num_blocks=*/1024);
  std::vector<int64_t> s2;
  for (size_t i = 0; i < golden_->size(); ++i)
    s2.push_back(Add((*golden_)[i].prompt_ids, Sampled(7 + i)));
  auto large = RunAll();
  EXPECT_EQ(engine_->scheduler().num_preemptions(), 0);
  for (size_t i = 0; i < golden_->size(); ++i) {
    EXPECT_EQ(small[s[i]].outputs[0], large[s2[i]].outputs[0]) << "seeded prompt " << i;
    EXPECT_NE(large[s2[i]].outputs[0], (*golden_)[i].greedy_ids) << "sampling should differ";
  }
}

TEST_F(EngineTest, MaxLenReservationTakesEveryBlockAtAdmissionAndRunsFewerAtOnce) {
  // 40 blocks of 16: a sequence that may grow to 257 tokens reserves 16 of them up front, so
  // max-len runs two at a time where on-demand runs all six golden prompts.
  std::map<KvReservation, int> peak;
  for (KvReservation mode : {KvReservation::kMaxLen, KvReservation::kOnDemand}) {
    Start(/*num_blocks=*/40, 257, 512, mode);
    const int64_t first = Add((*golden_)[0].prompt_ids);
    std::map<int64_t, Result> results;
    ASSERT_TRUE(StepInto(results));
    const int prompt_blocks = ((*golden_)[0].prompt_ids.size() + 15) / 16;
    EXPECT_EQ(engine_->scheduler().kv().pool().num_used_blocks(),
              mode == KvReservation::kMaxLen ? 16 : prompt_blocks);
    std::vector<int64_t> ids = {first};
    for (size_t i = 1; i < golden_->size(); ++i) ids.push_back(Add((*golden_)[i].prompt_ids));
    results = RunAll(std::move(results));
    peak[mode] = peak_running_;
    if (mode == KvReservation::kMaxLen) {
      EXPECT_EQ(engine_->scheduler().num_preemptions(), 0) << "everything was reserved";
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(results[ids[i]].outputs[0], (*golden_)[i].greedy_ids) << (*golden_)[i].prompt;
    }
  }
  EXPECT_EQ(peak[KvReservation::kMaxLen], 2);
  EXPECT_EQ(peak[KvReservation::kOnDemand], static_cast<int>(golden_->size()));
}

TEST_F(EngineTest, WithPrefixCachingOffEveryPromptIsComputed) {
  Start(512, 257, 512, KvReservation::kOnDemand, /*prefix_caching=*/false);
  const auto& p = (*golden_)[5].prompt_ids;
  const int64_t first = Add(p);
  auto r1 = RunAll();
  const int64_t second = Add(p);
  auto r2 = RunAll();
  EXPECT_EQ(r2[second].num_cached_tokens, 0);
  EXPECT_EQ(r2[second].outputs[0], r1[first].outputs[0]);
  EXPECT_EQ(engine_->scheduler().kv().num_prefix_hit_tokens(), 0);
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndSeedsMatter) {
  Start(512);
  const auto& p = (*golden_)[1].prompt_ids;
  const int64_t a = Add(p, Sampled(11)), b = Add(p, Sampled(11)), c = Add(p, Sampled(12));
  auto r = RunAll();
  EXPECT_EQ(r[a].outputs[0], r[b].outputs[0]);
  EXPECT_NE(r[a].outputs[0], r[c].outputs[0]);
}

TEST_F(EngineTest, ARepeatedPrefixIsServedFromTheCache) {
  Start(512);
  const auto& p = (*golden_)[5].prompt_ids;  // 19 tokens: one full block of 16
  const int64_t first = Add(p);
  auto r1 = RunAll();
  EXPECT_EQ(r1[first].num_cached_tokens, 0);
  const int64_t second = Add(p);
  auto r2 = RunAll();
  EXPECT_EQ(r2[second].num_cached_tokens, 16);
  EXPECT_EQ(r2[second].outputs[0], r1[first].outputs[0]);
  EXPECT_GT(engine_->scheduler().kv().num_prefix_hit_tokens(), 0);
}

// Requests that arrive together with one long system prompt: the first computes it, the
// others wait for its blocks instead of each computing its own copy, and get them from the
// cache (vLLM would compute it in every request admitted before the first one's step ended).
TEST_F(EngineTest, RequestsArrivingTogetherComputeASharedPrefixOnce) {
  Start(/*num_blocks=*/512);
  const auto suffixes = ManyPrompts();
  std::vector<int> system = {1};
  for (int i = 0; system.size() < 70; ++i) {
    system.insert(system.end(), suffixes[i].begin() + 1, suffixes[i].end());
  }
  system.resize(70);  // four full blocks, then six tokens that each prompt's block 4 holds
  std::vector<std::vector<int>> prompts, alone;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(system);
    prompts.back().insert(prompts.back().end(), suffixes[8 + i].begin() + 1, suffixes[8 + i].end());
  }
  for (const auto& p : prompts) {
    Start(512);  // a fresh cache for each: nothing shared
    const int64_t id = Add(p, Greedy(), 1, 24);
    alone.push_back(RunAll()[id].outputs[0]);
  }
  Start(512);
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(Add(p, Greedy(), 1, 24));
  auto together = RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[ids[i]].outputs[0], alone[i]) << "prompt " << i;
    EXPECT_EQ(together[ids[i]].num_cached_tokens, i == 0 ? 0 : 64) << "prompt " << i;
  }
  EXPECT_EQ(engine_->scheduler().kv().num_prefix_hit_tokens(), 7 * 64);
}

// A waiting request does not wait on a prefix nobody is computing: distinct prompts are all
// admitted in the first step, and so is the second of two alike when the first one's client
// stopped reading (a paused sequence is not scheduled, so it would never fill the blocks).
TEST_F(EngineTest, NoRequestWaitsOnAPrefixNobodyIsComputing) {
  Start(/*num_blocks=*/512);
  const auto prompts = ManyPrompts();
  for (int i = 0; i < 4; ++i) Add(prompts[i]);
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(engine_->scheduler().num_running(), 4);
  EXPECT_EQ(engine_->scheduler().num_waiting(), 0);
  RunAll();

  // A budget of 32 tokens a step: the first computes its 80-token prompt in three steps.
  Start(/*num_blocks=*/512, /*max_model_len=*/257, /*max_num_batched_tokens=*/32);
  std::vector<int> prompt;
  for (int i = 0; prompt.size() < 80; ++i) {
    prompt.insert(prompt.end(), prompts[i].begin() + (i > 0), prompts[i].end());
  }
  prompt.resize(80);
  auto paused = std::make_shared<std::atomic<bool>>(false);
  GenerationRequest first;
  first.prompt_ids = prompt;
  first.sampling = Greedy();
  first.max_tokens = 4;
  first.paused = paused;
  ASSERT_TRUE(engine_->AddRequest(first).ok());
  const int64_t second = Add(prompt, Greedy(), 1, 4);
  std::map<int64_t, Result> results;
  ASSERT_TRUE(StepInto(results));  // the first computes tokens 0-31 (the whole budget)
  paused->store(true);
  ASSERT_TRUE(StepInto(results));
  EXPECT_EQ(engine_->scheduler().num_running(), 2) << "the first is paused: nothing to wait for";
  EXPECT_EQ(engine_->scheduler().num_waiting(), 0);
  paused->store(false);
  results = RunAll(results);
  EXPECT_EQ(results[second].outputs[0].size(), 4u);
  EXPECT_EQ(results[second].num_cached_tokens, 32);
}

TEST_F(EngineTest, ForksShareThePromptAndCopyOnWriteKeepsThemCorrect) {
  // Greedy forks must each equal the golden output: any KV corruption from sharing the
  // partial prompt block (13 tokens: 12 shared, then each fork writes position 12) shows.
  Start(512);
  const auto& c = (*golden_)[1];
  ASSERT_NE((c.prompt_ids.size() - 1) % 16, 0u) << "the case must share a partial block";
  const int64_t id = Add(c.prompt_ids, Greedy(), /*n=*/3);
  auto r = RunAll();
  ASSERT_EQ(r[id].outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[id].outputs[i], c.greedy_ids) << "fork " << i;

  // Sampled forks differ from each other but are reproducible, also under preemption.
  const int64_t s = Add(c.prompt_ids, Sampled(3), 4);
  auto sampled = RunAll();
  EXPECT_NE(sampled[s].outputs[0], sampled[s].outputs[1]);
  Start(/*num_blocks=*/24);
  const int64_t s2 = Add(c.prompt_ids, Sampled(3), 4);
  auto small = RunAll();
  EXPECT_GT(engine_->scheduler().num_preemptions(), 0);
  EXPECT_EQ(small[s2].outputs, sampled[s].outputs);
}

TEST_F(EngineTest, RequestsThatCanNeverFitAreRejectedAtOnce) {
  Start(/*num_blocks=*/8, /*max_model_len=*/512);
  GenerationRequest r;
  r.prompt_ids = std::vector<int>(600, 5);
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("prompt"));
  r.prompt_ids = std::vector<int>(100, 5);
  r.max_tokens = 100;  // 200 tokens need 13 blocks; the pool has 8
  const absl::Status s = engine_->AddRequest(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("blocks"));
  r.max_tokens = 500;
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("model length"));
  r.max_tokens = 0;
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("max_tokens"));
  r.max_tokens = 5;
  r.prompt_ids = {1, 999};
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("999"));
  r.prompt_ids = {};
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("prompt"));
  r.prompt_ids = {1};
  r.n = 100;
  EXPECT_THAT(engine_->AddRequest(r).status().message(), HasSubstr("n = 100"));
  EXPECT_FALSE(engine_->has_unfinished());
}

TEST_F(EngineTest, AbortFreesBlocksMidGeneration) {
  Start(512);
  const int64_t keep = Add((*golden_)[0].prompt_ids);
  const int64_t drop = Add((*golden_)[1].prompt_ids, Greedy(), 2);
  std::map<int64_t, Result> partial;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(StepInto(partial));
  EXPECT_GT(engine_->scheduler().kv().pool().num_used_blocks(), 0);
  EXPECT_EQ(partial[drop].outputs.size(), 2u) << "both forks were running";
  engine_->AbortRequest(drop);
  auto r = RunAll(partial);  // checks that every block came back
  EXPECT_EQ(r[keep].outputs[0], (*golden_)[0].greedy_ids);
}

TEST_F(EngineTest, AbortSequenceDropsOneForkAndKeepsTheOther) {
  Start(512);
  GenerationRequest r;
  r.prompt_ids = (*golden_)[0].prompt_ids;
  r.sampling = Greedy();
  r.n = 2;
  const int64_t id = *engine_->AddRequest(r);
  std::map<int64_t, Result> partial;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(StepInto(partial));
  ASSERT_EQ(engine_->scheduler().num_running(), 2);
  EXPECT_TRUE(engine_->AbortSequence(id, 1));
  EXPECT_EQ(engine_->scheduler().num_running(), 1) << "the fork leaves the batch at once";
  EXPECT_FALSE(engine_->AbortSequence(id, 7)) << "no such sequence";
  const size_t dropped_len = partial[id].outputs[1].size();
  auto r2 = RunAll(partial);  // and every block comes back
  EXPECT_EQ(r2[id].outputs[0], (*golden_)[0].greedy_ids);
  EXPECT_EQ(r2[id].outputs[1].size(), dropped_len);
}

// Passes steps to a real worker but spoils its answers, as a broken remote worker might.
class SpoilingExecutor final : public Executor {
 public:
  SpoilingExecutor(Executor* real, std::function<void(StepResult&)> spoil)
      : real_(real), spoil_(std::move(spoil)) {}
  const WorkerInfo& info() const override { return real_->info(); }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    absl::StatusOr<StepResult> r = real_->Execute(command);
    if (r.ok()) spoil_(*r);
    return r;
  }

 private:
  Executor* real_;
  std::function<void(StepResult&)> spoil_;
};

TEST_F(EngineTest, AMalformedWorkerReplyIsAnErrorNotACrash) {
  const std::vector<std::function<void(StepResult&)>> spoils = {
      [](StepResult& r) { r.sampled.clear(); },
      [](StepResult& r) { r.sampled.push_back(r.sampled.front()); },
      [](StepResult& r) { r.sampled.front().token_id = 99999; },
      [](StepResult& r) { r.sampled.front().seq_id += 1000; },
      [](StepResult& r) { r.step_id += 1; },
  };
  for (const auto& spoil : spoils) {
    Start(64);  // a fresh worker: the previous case left its sequence there
    SpoilingExecutor bad(executor_.get(), spoil);
    EngineOptions eo;
    eo.max_model_len = 257;
    Engine engine(config_, &bad, eo);
    GenerationRequest r;
    r.prompt_ids = (*golden_)[0].prompt_ids;
    r.sampling = Greedy();
    ASSERT_TRUE(engine.AddRequest(r).ok());
    const absl::Status status = engine.Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_THAT(status.message(), HasSubstr("worker"));
  }
}

TEST_F(EngineTest, LongPromptsArePrefilledInChunks) {
  // A 64-token step budget cuts the prompts into chunks while others decode.
  Start(512, 257, /*max_num_batched_tokens=*/64);
  std::vector<int64_t> ids;
  for (const auto& c : *golden_) ids.push_back(Add(c.prompt_ids));
  const std::vector<int> long_prompt = [&] {
    std::vector<int> p = (*golden_)[0].prompt_ids;
    p.insert(p.end(), (*golden_)[0].greedy_ids.begin(), (*golden_)[0].greedy_ids.begin() + 150);
    return p;
  }();
  const int64_t long_id = Add(long_prompt, Greedy(), 1, 20);
  auto r = RunAll();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(r[ids[i]].outputs[0], (*golden_)[i].greedy_ids);
  // Continuing the golden text from inside it must reproduce the golden continuation.
  EXPECT_EQ(r[long_id].outputs[0], std::vector<int>((*golden_)[0].greedy_ids.begin() + 150,
                                                    (*golden_)[0].greedy_ids.begin() + 170));
}

}  // namespace
}  // namespace pagoda
