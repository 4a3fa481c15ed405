// One GEMM of Linear's kernels (worker/kernels/kernels.h, the active table) on TinyLlama's
// shapes, as Linear::Run makes it: x packed or quantized by row tiles, then the panels split in
// contiguous runs between the OpenMP threads. Reports the weights' bytes read per second
// (bytes_per_second) and that over the streaming-read roof measured with the same threads
// (tools/roofline.h; the `roof` counter, and `cpu_roof`, both in the process's CPU time, for a
// machine shared with other work): a decode (rows = 1) reads every weight once.
// The weights are random bytes (any bytes are valid weights; each f16 and f32 of them normal)
// copied over at least 256 MiB and taken in turn, so that they come from memory, not the L3.
// Also reports FLOP/s (`flops`, 2·k·n·rows per call; `core_GFLOPs` per second of the process's
// CPU time, that is per core): a batched step is bound by compute.
//   Args: dtype (0 f32, 1 int8, 2 int4 Q4_0 scales, 3 int4 Q4_K scales, 4 q6_k, 5 bf16 widened
//   to f32 (gemm_bf16), 6 bf16 compute (gemm_bf16dot: x rounded to bf16, vdpbf16ps; skipped
//   where the CPU lacks AVX512_BF16)), k, n, rows, threads.
//   OMP_WAIT_POLICY=passive build/bin/gemm_benchmark --benchmark_filter='dtype:[1-4]/'
//   (the quantized types)
//   OMP_WAIT_POLICY=passive build/bin/gemm_benchmark --benchmark_filter='rows:1/'  (decode)
//   OMP_WAIT_POLICY=passive build/bin/gemm_benchmark --benchmark_filter='dtype:[056]/'
//   (f32 and the two bf16 paths)
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "tools/roofline.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/isa.h"
#include "worker/kernels/kernels.h"

namespace pagoda {
namespace {

constexpr size_t kMinWeightBytes = size_t{256} << 20;

double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The streaming-read roof on `threads` threads in bytes per second of real time and per second
// of the process's CPU time (the second holds up on a machine shared with other work: a thread
// waiting for a core counts in neither the roof's nor the GEMM's CPU time), best of five.
struct Roof {
  double real = 0, cpu = 0;
};
Roof MeasuredRoof(int threads) {
  static Roof roof[3];
  if (roof[threads].real == 0) {
    const roofline::ReadBuffer buffer;
    double real = 1e9, cpu = 1e9;
    for (int i = 0; i < 5; ++i) {
      const double cpu_start = ProcessCpuSeconds();
      real = std::min(real, buffer.ReadOnce());
      cpu = std::min(cpu, ProcessCpuSeconds() - cpu_start);
    }
    roof[threads] = {roofline::ReadBuffer::kBytes / real, roofline::ReadBuffer::kBytes / cpu};
  }
  return roof[threads];
}

PackedShape Shape(const Kernels& kernels, int dtype, int k, int n) {
  if (dtype == 6) {
    return {.k = k,
            .n = n,
            .panel_width = PackedShape::kBf16Panel,
            .k_padded = Bf16KPadded(k),
            .dtype = WeightDtype::kBf16,
            .compute_bf16 = true};
  }
  PackedShape s{
      .k = k,
      .n = n,
      .panel_width = dtype == 0 || dtype == 5 ? kernels.panel_width : kernels.int8_panel_width,
      .k_padded = (k + 31) / 32 * 32,
      .dtype = dtype == 0   ? WeightDtype::kF32
               : dtype == 5 ? WeightDtype::kBf16
               : dtype == 1 ? WeightDtype::kInt8
               : dtype == 4 ? WeightDtype::kQ6K
                            : WeightDtype::kInt4,
      .int4_scales = dtype == 3 ? PackedShape::Int4Scales::kQ4_K : PackedShape::Int4Scales::kQ4_0};
  return s;
}

void BM_Gemm(benchmark::State& state) {
  const Kernels& kernels = ActiveKernels();
  const int dtype = static_cast<int>(state.range(0)), k = static_cast<int>(state.range(1)),
            n = static_cast<int>(state.range(2)), rows = static_cast<int>(state.range(3)),
            threads = static_cast<int>(state.range(4));
  if (dtype == 6 && !HasBf16Compute(kernels)) {
    state.SkipWithError("the CPU lacks AVX512_BF16");
    return;
  }
  omp_set_num_threads(threads);
  const Roof roof = MeasuredRoof(threads);
  const PackedShape shape = Shape(kernels, dtype, k, n);
  const size_t bytes = shape.num_bytes();
  // PAGODA_BENCH_IN_CACHE=1: one copy, which stays in the caches if it fits (the kernel's
  // compute speed, without the memory).
  const bool in_cache = std::getenv("PAGODA_BENCH_IN_CACHE") != nullptr;
  const size_t copies = in_cache ? 1 : std::max<size_t>(1, (kMinWeightBytes + bytes - 1) / bytes);
  HugePageBuffer weights((copies * bytes + 3) / 4);
  uint8_t* const w = reinterpret_cast<uint8_t*>(weights.data());
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < copies * bytes / 8; ++i) {
    // Bytes in [0x30, 0x3F]: small normal f32 and f16 values, any int8, int4 and q6_k.
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x = (x & 0x0F0F0F0F0F0F0F0FULL) | 0x3030303030303030ULL;
    std::memcpy(w + 8 * i, &x, 8);
  }
  std::vector<float> x(static_cast<size_t>(rows) * k), y(static_cast<size_t>(rows) * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  const bool floats = dtype == 0 || dtype == 5;
  const int tile = floats       ? kernels.row_tile
                   : dtype == 6 ? kernels.bf16_row_tile
                                : kernels.int8_row_tile;
  const int num_tiles = (rows + tile - 1) / tile;
  std::vector<float> packed_x(static_cast<size_t>(num_tiles) * tile * k);
  std::vector<uint32_t> bf16_x(dtype == 6 ? num_tiles * Bf16TileWords(tile, k) : 0);
  std::vector<uint8_t> quantized(num_tiles * Int8TileBytes(tile, shape.k_padded));
  size_t copy = 0;
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    const uint8_t* panels = w + (copy++ % copies) * bytes;
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int begin = static_cast<int>(static_cast<int64_t>(shape.num_panels()) * t / nt);
      const int end = static_cast<int>(static_cast<int64_t>(shape.num_panels()) * (t + 1) / nt);
      if (floats) {
        kernels.pack_rows(x.data(), rows, k, num_tiles * t / nt, num_tiles * (t + 1) / nt,
                          packed_x.data());
#pragma omp barrier
        if (dtype == 0) {
          kernels.gemm_f32(packed_x.data(), rows, reinterpret_cast<const float*>(panels), shape,
                           begin, end, nullptr, false, y.data(), n);
        } else {
          kernels.gemm_bf16(packed_x.data(), rows, reinterpret_cast<const uint16_t*>(panels), shape,
                            begin, end, nullptr, false, y.data(), n);
        }
      } else if (dtype == 6) {
        kernels.pack_rows_bf16(x.data(), rows, k, num_tiles * t / nt, num_tiles * (t + 1) / nt,
                               bf16_x.data());
#pragma omp barrier
        kernels.gemm_bf16dot(bf16_x.data(), rows, reinterpret_cast<const uint16_t*>(panels), shape,
                             begin, end, nullptr, false, y.data(), n);
      } else {
        kernels.quantize_rows(x.data(), rows, k, shape.k_padded, num_tiles * t / nt,
                              num_tiles * (t + 1) / nt, quantized.data());
#pragma omp barrier
        if (dtype == 1) {
          kernels.gemm_int8(quantized.data(), rows, panels, shape, begin, end, nullptr, false,
                            y.data(), n);
        } else if (dtype == 4) {
          kernels.gemm_q6k(quantized.data(), rows, panels, shape, begin, end, nullptr, false,
                           y.data(), n);
        } else {
          kernels.gemm_int4(quantized.data(), rows, panels, shape, begin, end, nullptr, false,
                            y.data(), n);
        }
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  const double total = static_cast<double>(state.iterations()) * bytes;
  state.SetBytesProcessed(static_cast<int64_t>(total));
  state.counters["roof"] = benchmark::Counter(total / roof.real, benchmark::Counter::kIsRate);
  state.counters["cpu_roof"] = total / cpu_seconds / roof.cpu;
  state.counters["roof_GBps"] = roof.real / 1e9;
  const double flops = static_cast<double>(state.iterations()) * 2.0 * k * n * rows;
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["core_GFLOPs"] = flops / cpu_seconds / 1e9;  // per second of one core's time
  state.SetLabel(std::string(kernels.name) + " " +
                 (dtype == 0   ? "f32"
                  : dtype == 1 ? "int8"
                  : dtype == 2 ? "int4_q4_0"
                  : dtype == 3 ? "int4_q4_k"
                  : dtype == 4 ? "q6_k"
                  : dtype == 5 ? "bf16"
                               : "bf16dot"));
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "k", "n", "rows", "threads"});
  const int shapes[][2] = {{2048, 2048}, {2048, 5632}, {2048, 11264}, {5632, 2048}};
  for (const int rows : {1, 6, 32, 512}) {
    for (const int threads : {1, 2}) {
      for (const auto& s : shapes) {
        for (const int dtype : {0, 1, 2, 3, 4, 5, 6}) b->Args({dtype, s[0], s[1], rows, threads});
      }
    }
  }
}

BENCHMARK(BM_Gemm)->Apply(Args)->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
