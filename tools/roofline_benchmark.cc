// This machine's roofline, for judging the engine's numbers against it (docs/BENCHMARKS.md):
//   BM_PeakFma/256, /512: fp32 GFLOP/s (the GFLOP counter, per second) of AVX2 / AVX-512 FMA
//                         on registers only, the compute roof of batched steps (512 only where
//                         the CPU has AVX-512);
//   BM_ReadBandwidth:     GB/s (the GB counter, per second) of streaming reads over 1 GiB (far
//                         beyond the caches), the memory roof of decode, which reads every
//                         weight once per step.
// Both run on OMP_NUM_THREADS threads, like the engine.
//   OMP_NUM_THREADS=2 build/bin/roofline_benchmark
#include "benchmark/benchmark.h"
#include "tools/roofline.h"

namespace pagoda::roofline {
namespace {

void BM_PeakFma(benchmark::State& state) {
  const bool avx512 = state.range(0) == 512;
  if (avx512 && !__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  for (auto _ : state) PeakGflops(avx512, 20'000'000);  // the harness times it
  const double flops = (avx512 ? 320.0 : 160.0) * 20'000'000 * omp_get_max_threads();
  state.counters["GFLOP"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
}

void BM_ReadBandwidth(benchmark::State& state) {
  const ReadBuffer buffer;
  for (auto _ : state) buffer.ReadOnce();
  state.counters["GB"] =
      benchmark::Counter(static_cast<double>(ReadBuffer::kBytes) * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
}

BENCHMARK(BM_PeakFma)
    ->Arg(256)
    ->Arg(512)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace
}  // namespace pagoda::roofline

BENCHMARK_MAIN();
