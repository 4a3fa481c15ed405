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
#include <sys/mman.h>

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
  // In transparent huge pages, as the engine keeps its weights: with 4 KiB pages the hardware
  // prefetcher stops at every page boundary and the figure would understate the memory.
  auto* data = static_cast<float*>(std::aligned_alloc(size_t{2} << 20, bytes));
  madvise(data, bytes, MADV_HUGEPAGE);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) data[i] = 1.0f;  // first touch by the thread that reads it
  for (auto _ : state) {
#pragma omp parallel
    {
      // Each thread streams its own contiguous share into 4 vector accumulators.
      const size_t per = n / omp_get_num_threads();
      const float* p = data + per * omp_get_thread_num();
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (size_t i = 0; i < per; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
      }
      __m256 sum = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
      benchmark::DoNotOptimize(sum);
    }
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
