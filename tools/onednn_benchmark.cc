// oneDNN's matmul on TinyLlama-1.1B's shapes (issue 24): OneDnnBf16Matmul (worker/
// onednn_matmul.h) over the shared bf16 panels, against oneDNN alone (x already bf16, one
// primitive of the exact row count: what the class adds), oneDNN's f32 matmul on weights
// reordered into its own layout (for the record beside our f32 kernel), and what making a
// primitive costs (brgemm needs the row count when a primitive is made: the class makes one per
// row count it sees).
// The weights are copied over at least 256 MiB and taken in turn, so that they come from
// memory, not the L3. Counters: GFLOPs (multiply-adds × 2 per second) and bytes_per_second (the
// weights read per second: a 1-row decode reads every weight once).
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive build/bin/onednn_benchmark
//   BM_Bf16Matmul args: k, n, rows, chunk_rows (rows per oneDNN call).
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "worker/huge_page_buffer.h"
#include "worker/onednn_matmul.h"

namespace pagoda {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

constexpr size_t kMinWeightBytes = size_t{256} << 20;

dnnl::engine& Engine() {
  static dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}
dnnl::stream& Stream() {
  static dnnl::stream* const stream = new dnnl::stream(Engine());
  return *stream;
}

// `copies` copies of `bytes` bytes of small normal bf16 (and f32) values, in huge pages.
HugePageBuffer RandomWeights(size_t bytes, size_t copies) {
  HugePageBuffer weights((copies * bytes + 7) / 8 * 2);
  uint8_t* const w = reinterpret_cast<uint8_t*>(weights.data());
  for (size_t i = 0; i < weights.size() / 2; ++i) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x = (x & 0x0F0F0F0F0F0F0F0FULL) | 0x3030303030303030ULL;
    std::memcpy(w + 8 * i, &x, 8);
  }
  return weights;
}

size_t Copies(size_t bytes) { return std::max<size_t>(1, (kMinWeightBytes + bytes - 1) / bytes); }

std::vector<float> Activations(size_t count) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  return x;
}

double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// `cpu_start`: ProcessCpuSeconds() before the loop. GFLOPs_cpu is the rate per second of the
// process's CPU time times the threads: what the threads would do with the cores to themselves
// (the machine is shared; with OMP_WAIT_POLICY=passive a waiting thread takes no CPU time).
void SetCounters(benchmark::State& state, int k, int n, int rows, size_t weight_bytes,
                 double cpu_start) {
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  const double iterations = static_cast<double>(state.iterations());
  const double flops = iterations * 2.0 * rows * k * n;
  state.SetBytesProcessed(static_cast<int64_t>(iterations * weight_bytes));
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GFLOPs_cpu"] = flops * 1e-9 / cpu_seconds * omp_get_max_threads();
}

void BM_Bf16Matmul(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2)), chunk_rows = static_cast<int>(state.range(3));
  const size_t bytes = static_cast<size_t>(k) * (n + 63) / 64 * 64 * 2, copies = Copies(bytes);
  const HugePageBuffer weights = RandomWeights(bytes, copies);
  std::vector<std::unique_ptr<OneDnnBf16Matmul>> matmuls;
  for (size_t c = 0; c < copies; ++c) {
    auto matmul =
        OneDnnBf16Matmul::Create(reinterpret_cast<const uint16_t*>(weights.data()) + c * bytes / 2,
                                 n, k, k, nullptr, false, chunk_rows);
    CHECK(matmul.ok()) << matmul.status();
    matmuls.push_back(*std::move(matmul));
  }
  const std::vector<float> x = Activations(static_cast<size_t>(rows) * k);
  std::vector<float> y(static_cast<size_t>(rows) * n);
  CHECK(matmuls[0]->Run(x.data(), rows, y.data(), n).ok());  // makes the primitives
  size_t copy = 0;
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    CHECK(matmuls[copy++ % copies]->Run(x.data(), rows, y.data(), n).ok());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, k, n, rows, bytes, cpu_start);
  state.SetLabel(matmuls[0]->impl_name() + (matmuls[0]->uses_caller_layout() ? "" : " (copy)"));
}

// One oneDNN primitive of exactly `rows` rows over `copies` weight copies in `weights_desc`,
// timed on src (rows, k) of `src_type`.
void RunPrimitive(benchmark::State& state, const dnnl::matmul::primitive_desc& pd,
                  const std::vector<memory>& weights, int k, int n, int rows, size_t bytes) {
  const dnnl::matmul matmul(pd);
  // Descs of `rows` rows: the primitive's may have a run-time row count.
  memory src({{rows, k}, pd.src_desc().data_type(), Tag::ab}, Engine());
  memory dst({{rows, n}, Dt::f32, Tag::ab}, Engine());
  std::memset(src.get_data_handle(), 0, src.get_desc().get_size());
  size_t copy = 0;
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    matmul.execute(Stream(), {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_WEIGHTS, weights[copy++ % weights.size()]},
                              {DNNL_ARG_DST, dst}});
    Stream().wait();
  }
  SetCounters(state, k, n, rows, bytes, cpu_start);
  state.SetLabel(pd.impl_info_str());
}

// oneDNN alone, bf16 x, our panels' layout, the exact row count.
void BM_Bf16Primitive(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2));
  const memory::desc weights_desc({k, n}, Dt::bf16, Tag::BA16a64b2a);
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(memory::desc({rows, k}, Dt::bf16, Tag::ab), weights_desc,
                         memory::desc({rows, n}, Dt::f32, Tag::ab)),
      Engine());
  const size_t bytes = weights_desc.get_size(), copies = Copies(bytes);
  HugePageBuffer buffer = RandomWeights(bytes, copies);
  std::vector<memory> weights;
  for (size_t c = 0; c < copies; ++c) {
    weights.emplace_back(weights_desc, Engine(),
                         reinterpret_cast<uint8_t*>(buffer.data()) + c * bytes);
  }
  RunPrimitive(state, pd, weights, k, n, rows, bytes);
}

// The run-time row count (option (c)): on our layout oneDNN 2.6 has only ref:any (`any` 0);
// with the weights' layout left to it (`any` 1) it picks gemm:jit on plain weights (a second
// copy), which packs them on every call.
void BM_Bf16RuntimeRows(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2));
  const bool any = state.range(3) != 0;
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(memory::desc({DNNL_RUNTIME_DIM_VAL, k}, Dt::bf16, Tag::ab),
                         memory::desc({k, n}, Dt::bf16, any ? Tag::any : Tag::BA16a64b2a),
                         memory::desc({DNNL_RUNTIME_DIM_VAL, n}, Dt::f32, Tag::ab)),
      Engine());
  const size_t bytes = pd.weights_desc().get_size(), copies = any ? Copies(bytes) : 1;
  HugePageBuffer buffer = RandomWeights(bytes, copies);
  std::vector<memory> weights;
  for (size_t c = 0; c < copies; ++c) {
    weights.emplace_back(pd.weights_desc(), Engine(),
                         reinterpret_cast<uint8_t*>(buffer.data()) + c * bytes);
  }
  RunPrimitive(state, pd, weights, k, n, rows, bytes);
}

// oneDNN's f32 matmul, weights (k, n) reordered once from plain into the layout it picks.
void BM_F32Primitive(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2));
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(memory::desc({rows, k}, Dt::f32, Tag::ab),
                         memory::desc({k, n}, Dt::f32, Tag::any),
                         memory::desc({rows, n}, Dt::f32, Tag::ab)),
      Engine());
  const size_t bytes = pd.weights_desc().get_size(), copies = Copies(bytes);
  const memory::desc plain({k, n}, Dt::f32, Tag::ab);
  HugePageBuffer buffer = RandomWeights(plain.get_size(), 1);
  memory from(plain, Engine(), buffer.data());
  std::vector<memory> weights;
  for (size_t c = 0; c < copies; ++c) {
    weights.emplace_back(pd.weights_desc(), Engine());
    dnnl::reorder(from, weights.back()).execute(Stream(), from, weights.back());
  }
  Stream().wait();
  RunPrimitive(state, pd, weights, k, n, rows, bytes);
}

// Making one bf16 primitive (primitive_desc + primitive, oneDNN's primitive cache off): rows 0
// is a run-time row count (which gets ref:any on our layout).
void BM_CreateBf16Primitive(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2));
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  const memory::dim m = rows == 0 ? DNNL_RUNTIME_DIM_VAL : rows;
  std::string impl;
  for (auto _ : state) {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(memory::desc({m, k}, Dt::bf16, Tag::ab),
                           memory::desc({k, n}, Dt::bf16, Tag::BA16a64b2a),
                           memory::desc({m, n}, Dt::f32, Tag::ab)),
        Engine());
    const dnnl::matmul matmul(pd);
    benchmark::DoNotOptimize(matmul.get());
    impl = pd.impl_info_str();
  }
  dnnl::set_primitive_cache_capacity(capacity);
  state.SetLabel(impl);
}

// Rounding x to bf16: ours (RoundToBf16) against oneDNN's reorder.
void BM_RoundToBf16(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), rows = static_cast<int>(state.range(1));
  const bool onednn = state.range(2) != 0;
  std::vector<float> x = Activations(static_cast<size_t>(rows) * k);
  std::vector<uint16_t> out(x.size());
  memory from({{rows, k}, Dt::f32, Tag::ab}, Engine(), x.data());
  memory to({{rows, k}, Dt::bf16, Tag::ab}, Engine(), out.data());
  const dnnl::reorder reorder(from, to);
  for (auto _ : state) {
    if (onednn) {
      reorder.execute(Stream(), from, to);
      Stream().wait();
    } else {
      RoundToBf16(x.data(), static_cast<int64_t>(x.size()), out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * x.size() * 4);
}

constexpr int kShapes[][2] = {{2048, 2048}, {2048, 256}, {2048, 5632}, {5632, 2048}};

void Bf16Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"k", "n", "rows", "chunk"});
  for (const auto& s : kShapes) {
    for (const int rows : {1, 4, 16, 32, 64, 512}) {
      b->Args({s[0], s[1], rows, OneDnnBf16Matmul::kChunkRows});
    }
    // The row-count strategies: chunks of 64 or 128 rows against one primitive of 512 rows.
    for (const int chunk : {64, 128, 512}) b->Args({s[0], s[1], 512, chunk});
    for (const int chunk : {64, 128}) b->Args({s[0], s[1], 100, chunk});
  }
}

void PrimitiveArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"k", "n", "rows"});
  for (const auto& s : kShapes) {
    for (const int rows : {1, 32, 64, 512}) b->Args({s[0], s[1], rows});
  }
}

void F32Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"k", "n", "rows"});
  for (const auto& s : kShapes) {
    for (const int rows : {32, 512}) b->Args({s[0], s[1], rows});
  }
}

BENCHMARK(BM_Bf16Matmul)
    ->Apply(Bf16Args)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);
BENCHMARK(BM_Bf16Primitive)
    ->Apply(PrimitiveArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);
BENCHMARK(BM_Bf16RuntimeRows)
    ->ArgNames({"k", "n", "rows", "any"})
    ->ArgsProduct({{2048}, {2048}, {1, 32, 512}, {1}})
    ->Args({2048, 2048, 1, 0})
    ->Args({2048, 2048, 32, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_F32Primitive)
    ->Apply(F32Args)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);
BENCHMARK(BM_CreateBf16Primitive)
    ->ArgNames({"k", "n", "rows"})
    ->Args({2048, 5632, 1})
    ->Args({2048, 5632, 64})
    ->Args({2048, 5632, 512})
    ->Args({5632, 2048, 64})
    ->Args({2048, 5632, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RoundToBf16)
    ->ArgNames({"k", "rows", "onednn"})
    ->ArgsProduct({{2048, 5632}, {1, 64}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
