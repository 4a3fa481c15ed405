// This machine's roofline, for judging the engine's numbers against it (docs/BENCHMARKS.md):
//   BM_PeakFma:        fp32 GFLOP/s (the GFLOP counter, per second) of AVX2 FMA on registers only
//   (no memory traffic), the
//                      compute roof of prefill;
//   BM_ReadBandwidth:  GB/s (the GB counter, per second) of streaming reads over 1 GiB (far beyond
//   the caches), the memory
//                      roof of decode, which reads every weight once per step.
// Both run on OMP_NUM_THREADS threads, like the engine.
//   OMP_NUM_THREADS=2 build/bin/roofline_benchmark
#include <immintrin.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "benchmark/benchmark.h"

namespace {

// 10 independent accumulators hide the FMA latency (4 cycles x 2 ports on current x86).
__attribute__((noinline)) __m256 FmaLoop(int64_t iterations, float seed) {
  __m256 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(seed + i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm256_add_ps(sum, acc[i]);
  return sum;
}

void BM_PeakFma(benchmark::State& state) {
  constexpr int64_t kIterations = 20'000'000;
  const int threads = omp_get_max_threads();
  for (auto _ : state) {
#pragma omp parallel
    {
      __m256 r = FmaLoop(kIterations, static_cast<float>(omp_get_thread_num()));
      benchmark::DoNotOptimize(r);
    }
  }
  // 10 FMAs x 8 lanes x 2 flops per iteration.
  const double flops = 160.0 * kIterations * threads;
  state.counters["GFLOP"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const size_t bytes = size_t{1} << 30;
  const size_t n = bytes / sizeof(float);
  auto* data = static_cast<float*>(std::aligned_alloc(64, bytes));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) data[i] = 1.0f;  // first touch by the thread that reads it
  for (auto _ : state) {
    float total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (size_t i = 0; i < n; i += 32) {
      const float* p = data + i;
      __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_load_ps(p), _mm256_load_ps(p + 8)),
                               _mm256_add_ps(_mm256_load_ps(p + 16), _mm256_load_ps(p + 24)));
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
      h = _mm_hadd_ps(h, h);
      total += _mm_cvtss_f32(_mm_hadd_ps(h, h));
    }
    benchmark::DoNotOptimize(total);
  }
  state.counters["GB"] = benchmark::Counter(static_cast<double>(bytes) * state.iterations() / 1e9,
                                            benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
  std::free(data);
}

BENCHMARK(BM_PeakFma)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace

BENCHMARK_MAIN();
