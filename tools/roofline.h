// This machine's roof, measured: fp32 FMA throughput on registers only (no memory traffic) for
// an ISA's vector width, and streaming-read bandwidth over 1 GiB in huge pages. Shared by
// roofline_benchmark (the figures alone) and engine_benchmark (the fraction of the roof a step
// reaches). Both run on every OpenMP thread. The AVX-512 loop carries its own target
// attribute: call it only where the CPU has AVX-512.
#ifndef PAGODA_TOOLS_ROOFLINE_H_
#define PAGODA_TOOLS_ROOFLINE_H_

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace pagoda::roofline {

// 10 independent accumulators hide the FMA latency (4 cycles x 2 ports on current x86).
// Returns flops done.
__attribute__((noinline)) inline double FmaLoop256(int64_t iterations, float seed) {
  __m256 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(seed + i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm256_add_ps(sum, acc[i]);
  volatile float sink = _mm256_cvtss_f32(sum);
  (void)sink;
  return 160.0 * iterations;
}

__attribute__((noinline, target("avx512f"))) inline double FmaLoop512(int64_t iterations,
                                                                      float seed) {
  __m512 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm512_set1_ps(seed + i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 10; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm512_add_ps(sum, acc[i]);
  volatile float sink = _mm512_cvtss_f32(sum);
  (void)sink;
  return 320.0 * iterations;
}

// GFLOP/s of `iterations` FMA-loop iterations on every thread.
inline double PeakGflops(bool avx512, int64_t iterations) {
  const auto start = std::chrono::steady_clock::now();
  double flops = 0;
#pragma omp parallel reduction(+ : flops)
  {
    const float seed = static_cast<float>(omp_get_thread_num());
    flops += avx512 ? FmaLoop512(iterations, seed) : FmaLoop256(iterations, seed);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return flops / s / 1e9;
}

// A 1 GiB buffer in transparent huge pages, first touched by the threads that read it. With
// 4 KiB pages the hardware prefetcher stops at every page boundary and the figure would
// understate the memory.
class ReadBuffer {
 public:
  static constexpr size_t kBytes = size_t{1} << 30;
  ReadBuffer() : data_(static_cast<float*>(std::aligned_alloc(size_t{2} << 20, kBytes))) {
    madvise(data_, kBytes, MADV_HUGEPAGE);
    // No two pages alike: the host can merge identical pages (a buffer of 1.0f once
    // "streamed" at 326 GB/s on one core, from cache).
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < kBytes / sizeof(float); ++i) {
      data_[i] = static_cast<float>(i % 1'000'003);
    }
  }
  ~ReadBuffer() { std::free(data_); }
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  // Streams the buffer once on every thread (each its contiguous share); returns seconds.
  double ReadOnce() const {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      const size_t n = kBytes / sizeof(float);
      const size_t per = n / omp_get_num_threads();
      const float* p = data_ + per * omp_get_thread_num();
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (size_t i = 0; i < per; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
      }
      // The sums must be seen to be used, or GCC drops the loads (it did, with a volatile
      // store of lane 0: the "roof" read 268 GB/s on one core).
      asm volatile("" : : "x"(a0), "x"(a1), "x"(a2), "x"(a3));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  float* data_;
};

}  // namespace pagoda::roofline

#endif  // PAGODA_TOOLS_ROOFLINE_H_
