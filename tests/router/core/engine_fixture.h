// The router core over one in-process worker (the offline mode), for the tests of the Engine
// and of the Scheduler it drives: a real stories260K worker, so outputs compare with run.c's.
#ifndef PAGODA_TESTS_ROUTER_CORE_ENGINE_FIXTURE_H_
#define PAGODA_TESTS_ROUTER_CORE_ENGINE_FIXTURE_H_

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/model/model_config.h"
#include "gtest/gtest.h"
#include "router/core/engine.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"

namespace pagoda::testing {

struct Result {
  std::vector<std::vector<int>> outputs;     // (n)
  std::vector<FinishReason> reasons;         // (n)
  std::vector<std::vector<float>> logprobs;  // (n) each sampled token's log p
  int num_cached_tokens = 0;
};

class EngineFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { golden_ = new std::vector<GoldenCase>(LoadGoldenCases()); }
  static void TearDownTestSuite() {
    delete golden_;
    golden_ = nullptr;
  }

  // A fresh worker + engine with `num_blocks` KV blocks of 16 tokens, speculative_ as set.
  void Start(int num_blocks, int max_model_len = 257, int max_num_batched_tokens = 512,
             KvReservation reservation = KvReservation::kOnDemand, bool prefix_caching = true);

  // Runs everything queued to completion, then checks that nothing leaked.
  std::map<int64_t, Result> RunAll(std::map<int64_t, Result> results = {});
  // One step, its updates added to `results` by request id.
  bool StepInto(std::map<int64_t, Result>& results);
  void ExpectNothingLeaked();

  // Queues a request under the next free id and returns that id.
  int64_t Add(const std::vector<int>& prompt, SamplingParams sampling = Greedy(), int n = 1,
              std::optional<int> max_tokens = std::nullopt);
  // The same for a request built by the test.
  int64_t Add(const GenerationRequest& request);

  static SamplingParams Greedy();
  static SamplingParams Sampled(uint64_t seed);
  // 32 distinct prompts: the golden ones' beginnings and variations of them.
  static std::vector<std::vector<int>> ManyPrompts();

  static const std::vector<GoldenCase>& golden() { return *golden_; }

  inline static std::vector<GoldenCase>* golden_ = nullptr;
  SpeculativeOptions speculative_;  // off
  int peak_running_ = 0;            // most sequences running at once in the last RunAll
  int64_t next_request_id_ = 0;
  ModelConfig config_;
  std::unique_ptr<InProcessExecutor> executor_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_ROUTER_CORE_ENGINE_FIXTURE_H_
