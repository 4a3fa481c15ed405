// Engine throughput on a random-weight model (values don't matter for speed), through the same
// Engine → InProcessExecutor → WorkerEngine path as `pagoda run`:
//   BM_Prefill/P      one prompt of P tokens, 1 output token      (items = prompt tokens)
//   BM_Decode/S       one step of S sequences that are decoding    (items = tokens generated)
// Shape: $PAGODA_BENCH_SHAPE (default stories110M; see common/model/random_weights.cc), or a
// checkpoint file in $PAGODA_BENCH_MODEL. Threads: OMP_NUM_THREADS.
#include <cstdlib>
#include <memory>
#include <random>

#include "benchmark/benchmark.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "router/engine.h"
#include "worker/in_process_executor.h"

namespace pagoda {
namespace {

struct Bench {
  ModelConfig config;
  std::unique_ptr<InProcessExecutor> executor;
  std::unique_ptr<Engine> engine;
  std::mt19937 rng{1};

  std::vector<int> RandomPrompt(int n) {
    std::uniform_int_distribution<int> id(3, config.vocab_size - 1);
    std::vector<int> p = {1};
    while (static_cast<int>(p.size()) < n) p.push_back(id(rng));
    return p;
  }
  void RunToCompletion() {
    while (engine->has_unfinished()) CHECK(engine->Step().ok());
  }
};

Bench& GetBench() {
  static Bench* bench = [] {
    auto* b = new Bench;
    ModelWeights weights;
    if (const char* path = std::getenv("PAGODA_BENCH_MODEL")) {
      auto w = LoadLlama2cCheckpoint(path);
      CHECK(w.ok()) << w.status();
      weights = *std::move(w);
    } else {
      const char* shape = std::getenv("PAGODA_BENCH_SHAPE");
      ModelConfig c;
      CHECK(NamedModelConfig(shape ? shape : "stories110M", &c)) << shape;
      weights = RandomModelWeights(c, 1);
    }
    b->config = weights.config;
    WorkerOptions wo;
    wo.kv_cache_bytes = 1LL << 30;
    wo.max_num_batched_tokens = 2048;
    auto worker = WorkerEngine::Create(std::move(weights), wo);
    CHECK(worker.ok()) << worker.status();
    b->executor = std::make_unique<InProcessExecutor>(*std::move(worker));
    EngineOptions eo;
    eo.max_num_batched_tokens = 2048;
    b->engine = std::make_unique<Engine>(b->config, b->executor.get(), eo);
    return b;
  }();
  return *bench;
}

GenerationRequest Request(std::vector<int> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

void BM_Prefill(benchmark::State& state) {
  Bench& b = GetBench();
  const int prompt_len = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    CHECK(b.engine->AddRequest(Request(b.RandomPrompt(prompt_len), 1)).ok());  // no cache hits
    state.ResumeTiming();
    b.RunToCompletion();
  }
  state.SetItemsProcessed(state.iterations() * prompt_len);
}

void BM_Decode(benchmark::State& state) {
  Bench& b = GetBench();
  const int num_seqs = static_cast<int>(state.range(0));
  const int prompt_len = 32, budget = 400;  // decode positions 32..~300: a typical short chat
  for (int i = 0; i < num_seqs; ++i) {
    CHECK(b.engine->AddRequest(Request(b.RandomPrompt(prompt_len), budget)).ok());
  }
  CHECK(b.engine->Step().ok());  // all prefills fit one step; from here every step decodes
  for (auto _ : state) {
    auto updates = b.engine->Step();
    CHECK(updates.ok() && static_cast<int>(updates->size()) == num_seqs);
  }
  state.SetItemsProcessed(state.iterations() * num_seqs);
  b.RunToCompletion();  // after the timed loop: not measured
}

BENCHMARK(BM_Prefill)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK(BM_Decode)->Arg(1)->Arg(32)->Unit(benchmark::kMillisecond)->Iterations(200);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
