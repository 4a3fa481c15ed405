// What a step's sampling costs the worker for 32 sequences at a 32k vocabulary (the served
// benchmark's shape, BENCHMARKS §18), greedy, without and with structured output's allowed
// set: a mask that allows nearly every token (inside a JSON string) and one that allows a
// handful (between values). The constrained part of a served step's overhead.
//   build/bin/sampler_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "worker/sampler.h"

namespace pagoda {
namespace {

constexpr int kVocab = 32000;
constexpr int kSequences = 32;

void BM_SampleStep(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));  // 0: no mask; 1: string; 2: structure
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(kSequences) * kVocab);
  for (float& x : logits) x = normal(rng);
  std::vector<uint64_t> mask;
  if (kind != 0) {
    mask.assign((kVocab + 63) / 64, 0);
    for (int id = 0; id < kVocab; ++id) {
      const bool allowed = kind == 1 ? id % 97 != 5 : id % 4000 == 17;
      if (allowed) mask[id / 64] |= uint64_t{1} << (id % 64);
    }
  }
  Sampler sampler(kVocab);
  SamplingParams params;
  params.temperature = 0.0f;
  const std::vector<int> prompt = {1, 2, 3}, output = {4};
  std::vector<float> row(kVocab);
  for (auto _ : state) {
    for (int s = 0; s < kSequences; ++s) {
      state.PauseTiming();
      std::copy(logits.begin() + static_cast<size_t>(s) * kVocab,
                logits.begin() + static_cast<size_t>(s + 1) * kVocab, row.begin());
      state.ResumeTiming();
      benchmark::DoNotOptimize(sampler.Sample(row.data(), params, prompt, output, s, {}, mask));
    }
  }
  state.SetLabel(kind == 0 ? "no mask" : kind == 1 ? "string mask" : "structure mask");
}
BENCHMARK(BM_SampleStep)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
