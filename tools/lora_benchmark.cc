// Decode throughput with LoRA adapters (issue 39's benchmark): one step of 32 decoding sequences
// spread over A rank-16 adapters (all seven targets of every layer), against the same step of
// the base model, through WorkerEngine (what a worker runs for the router's steps):
//   BM_LoraDecode/A   A = 0: every sequence on the base; else sequence i on adapter i % A
//                     (items = tokens generated; each timed iteration is one step)
// The adapters are random PEFT directories written (bf16) to a temporary directory at start and
// loaded as --lora-modules loads them. Shape: $PAGODA_BENCH_SHAPE (default 1B, TinyLlama's);
// weights: $PAGODA_BENCH_WEIGHTS (default bf16; any --weight-dtype); rank: $PAGODA_BENCH_RANK
// (default 16). Threads: OMP_NUM_THREADS. Compare rows with --benchmark_repetitions and
// --benchmark_enable_random_interleaving (this VM's bandwidth wanders).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/model/lora_adapter.h"
#include "common/model/random_weights.h"
#include "common/model/safetensors.h"
#include "glog/logging.h"
#include "worker/worker_engine.h"

namespace pagoda {
namespace {

constexpr int kStreams = 32;
constexpr int kPromptTokens = 32;
constexpr int kMaxSteps = 64;  // decode steps of one run (Iterations)
constexpr int kBlockSize = 16;
constexpr int kMaxAdapters = 16;

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// A random PEFT adapter of `config` at `dir`.
void WriteAdapter(const ModelConfig& config, int rank, uint64_t seed, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<float>> values;
  values.reserve(config.num_layers * kNumLoraTargets * 2);
  std::vector<TensorToWrite> tensors;
  for (int l = 0; l < config.num_layers; ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const int64_t in = LoraTargetIn(config, t), out = LoraTargetOut(config, t);
      const bool attn =
          t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
      const std::string name = absl::StrCat("base_model.model.model.layers.", l,
                                            attn ? ".self_attn." : ".mlp.", LoraTargetName(t));
      std::uniform_real_distribution<float> u(-0.01f, 0.01f);
      for (auto [suffix, rows, cols] : {std::tuple{".lora_A.weight", int64_t{rank}, in},
                                        std::tuple{".lora_B.weight", out, int64_t{rank}}}) {
        std::vector<float>& v = values.emplace_back(rows * cols);
        for (float& x : v) x = u(rng);
        tensors.push_back({name + suffix, {rows, cols}, &v});
      }
    }
  }
  CHECK(WriteSafetensors(dir + "/adapter_model.safetensors", tensors, TensorDtype::kBF16).ok());
  std::ofstream(dir + "/adapter_config.json")
      << "{\"r\": " << rank << ", \"lora_alpha\": " << 2 * rank
      << ", \"target_modules\": \"all-linear\", \"bias\": \"none\"}";
}

struct Bench {
  ModelConfig config;
  std::unique_ptr<WorkerEngine> engine;
  int64_t next_seq = 1;
  int64_t next_step = 1;
};

Bench& GetBench() {
  static Bench* bench = [] {
    auto* b = new Bench;
    const std::string shape = Env("PAGODA_BENCH_SHAPE", "1B");
    CHECK(NamedModelConfig(shape, &b->config)) << shape;
    const int rank = std::stoi(Env("PAGODA_BENCH_RANK", "16"));
    const std::string dir = std::filesystem::temp_directory_path().string() + "/pagoda_lora_bench";
    WorkerOptions options;
    absl::StatusOr<std::optional<WeightDtype>> dtype =
        ParseWeightDtype(Env("PAGODA_BENCH_WEIGHTS", "bf16"));
    CHECK(dtype.ok()) << dtype.status();
    options.weight_dtype = *dtype;
    options.num_blocks = kStreams * ((kPromptTokens + kMaxSteps + kBlockSize) / kBlockSize + 1);
    options.block_size = kBlockSize;
    options.max_num_batched_tokens = kStreams * kPromptTokens;
    options.max_num_seqs = kStreams;
    options.max_loras = options.max_cpu_loras = kMaxAdapters;
    for (int i = 0; i < kMaxAdapters; ++i) {
      const std::string path = absl::StrCat(dir, "/a", i);
      WriteAdapter(b->config, rank, 100 + i, path);
      options.lora_modules.push_back({absl::StrCat("a", i), path});
    }
    absl::StatusOr<std::unique_ptr<WorkerEngine>> engine =
        WorkerEngine::Create(RandomModelWeights(b->config, 1), options);
    CHECK(engine.ok()) << engine.status();
    b->engine = *std::move(engine);
    std::filesystem::remove_all(dir);
    benchmark::AddCustomContext("shape", shape);
    benchmark::AddCustomContext("lora_rank", std::to_string(rank));
    return b;
  }();
  return *bench;
}

void BM_LoraDecode(benchmark::State& state) {
  Bench& b = GetBench();
  const int num_adapters = static_cast<int>(state.range(0));
  const int blocks_each = (kPromptTokens + kMaxSteps + kBlockSize) / kBlockSize + 1;
  std::mt19937 rng(7);
  // One step prefills every stream (untimed); each timed iteration is one decode step.
  StepCommand prefill;
  prefill.step_id = b.next_step++;
  std::vector<int64_t> ids;
  for (int i = 0; i < kStreams; ++i) {
    NewSequence& n = prefill.new_sequences.emplace_back();
    n.seq_id = b.next_seq++;
    n.sampling.temperature = 0;
    for (int t = 0; t < kPromptTokens; ++t) {
      n.prompt_ids.push_back(2 + static_cast<int>(rng() % (b.config.vocab_size - 2)));
    }
    if (num_adapters > 0) n.adapter = absl::StrCat("a", i % num_adapters);
    ScheduledSequence& s = prefill.scheduled.emplace_back();
    s.seq_id = n.seq_id;
    s.token_ids = n.prompt_ids;
    for (int k = 0; k < blocks_each; ++k) s.new_block_ids.push_back(i * blocks_each + k);
    s.sample = true;
    ids.push_back(n.seq_id);
  }
  absl::StatusOr<StepResult> result = b.engine->Execute(prefill);
  CHECK(result.ok()) << result.status();
  std::vector<int> last(kStreams);
  for (int i = 0; i < kStreams; ++i) last[i] = result->sampled[i].token_id;
  int computed = kPromptTokens;
  StepCommand decode;
  for (auto _ : state) {
    decode.step_id = b.next_step++;
    decode.scheduled.clear();
    for (int i = 0; i < kStreams; ++i) {
      ScheduledSequence& s = decode.scheduled.emplace_back();
      s.seq_id = ids[i];
      s.token_ids = {last[i]};
      s.num_computed_tokens = computed;
      s.num_kept_blocks = blocks_each;
      s.sample = true;
    }
    result = b.engine->Execute(decode);
    CHECK(result.ok()) << result.status();
    for (int i = 0; i < kStreams; ++i) last[i] = result->sampled[i].token_id;
    ++computed;
  }
  StepCommand finish;
  finish.step_id = b.next_step++;
  finish.finished_ids = ids;
  CHECK(b.engine->Execute(finish).ok());
  state.SetItemsProcessed(state.iterations() * kStreams);
}
BENCHMARK(BM_LoraDecode)->Arg(0)->Arg(1)->Arg(4)->Arg(16)->Iterations(16)->UseRealTime();

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
