// Paged attention alone, decode shapes (block 16):
//   BM_DecodeAttention/S/C/D/P    stories110M's heads (12 heads of 64, no GQA): S sequences,
//                                 one query each, C tokens of context, K/V stored as D (0 = f32,
//                                 1 = bf16, 2 = f16, 3 = int8; the label names it), the first P
//                                 tokens' blocks shared by all (a common system prompt)
//   BM_DecodeAttention1B/S/C/D    one layer of TinyLlama-1.1B's (32 query heads of 64 over 4 KV
//                                 heads), the depths of issue 42: 4k to 16k, and 512 (in cache)
//   BM_PrefillAttention1B/C/D     the same layer for a prefill chunk of 512 rows whose last is at
//                                 depth C: the last chunk of a C-token prompt
// Reports the K/V bytes per second; `roof`, the bytes read's share of the read bandwidth sampled
// (tools/roofline.h) between the timed calls; and `fma_share`, the attention's multiply-adds
// (2 · head_dim per query head and token: q·k and p·v) as f32 FMAs over this machine's f32 FMA
// peak, measured once at start. Attention computes in f32 whatever K/V's type: a GQA group of
// 8 query heads spends 16 FMAs per K/V element pair, so on a core whose FMA rate is low next to
// its share of the read bandwidth, `fma_share`, not `roof`, is the one that reaches its top.
#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "tools/roofline.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/isa.h"
#include "worker/kv_dtype.h"
#include "worker/paged_attention.h"

namespace pagoda {
namespace {

// A pool of `runs` (block, KV head) runs of `dtype`, random in [-1, 1) (no two pages alike: see
// roofline.h).
HugePageBuffer RandomPool(size_t runs, const AttentionShape& shape, KvDtype dtype, uint32_t seed) {
  const size_t run_bytes =
      static_cast<size_t>(shape.block_size) * KvRowBytes(dtype, shape.head_dim);
  HugePageBuffer pool((runs * run_bytes + sizeof(float) - 1) / sizeof(float));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(shape.head_dim);
  char* base = reinterpret_cast<char*>(pool.data());
  for (size_t r = 0; r < runs; ++r) {
    for (int o = 0; o < shape.block_size; ++o) {
      for (float& x : row) x = dist(rng);
      WriteKvRow(row.data(), shape.head_dim, dtype, shape.block_size, o, base + r * run_bytes);
    }
  }
  return pool;
}

// Read bandwidth samples of one benchmark (GB/s over all of them).
class Bandwidth {
 public:
  void Sample() {
    static roofline::ReadBuffer* buffer = new roofline::ReadBuffer;
    seconds_ += buffer->ReadOnce();
    bytes_ += roofline::ReadBuffer::kBytes;
  }
  double gbs() const { return bytes_ / seconds_ / 1e9; }

 private:
  double bytes_ = 0, seconds_ = 0;
};

// This machine's f32 FMA peak on every thread, GFLOP/s: measured once.
double PeakGflops() {
  static const double peak =
      roofline::PeakGflops(std::string(ActiveKernels().name) == "avx512", 50'000'000);
  return peak;
}

void RunDecodeAttention(benchmark::State& state, const AttentionShape& shape, int num_seqs, int ctx,
                        KvDtype dtype, int shared_tokens) {
  const int blocks_per_seq = (ctx + shape.block_size - 1) / shape.block_size;
  const int num_blocks = num_seqs * blocks_per_seq;
  const size_t runs = static_cast<size_t>(num_blocks) * shape.num_kv_heads;
  const HugePageBuffer k = RandomPool(runs, shape, dtype, 1);
  const HugePageBuffer v = RandomPool(runs, shape, dtype, 2);
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));  // scattered, as in a busy pool
  // The first `shared` tokens' blocks are the same for every sequence (one system prompt, in
  // the prefix cache): every table starts with sequence 0's.
  const int shared_blocks = shared_tokens / shape.block_size;
  for (int s = 1; s < num_seqs; ++s) {
    std::copy_n(ids.begin(), shared_blocks, ids.begin() + s * blocks_per_seq);
  }
  std::vector<AttentionSequence> seqs;
  for (int s = 0; s < num_seqs; ++s) {
    seqs.push_back({s, 1, ctx - 1, &ids[s * blocks_per_seq]});
  }
  const int row = shape.num_heads * shape.head_dim;
  std::vector<float> q(static_cast<size_t>(num_seqs) * row, 0.1f), out(q.size());
  const KvLayerView kv{k.data(), v.data(), dtype};
  Bandwidth bandwidth;
  bandwidth.Sample();
  int64_t iteration = 0;
  for (auto _ : state) {
    if (++iteration % 16 == 0) {
      state.PauseTiming();
      bandwidth.Sample();
      state.ResumeTiming();
    }
    PagedAttention(ActiveKernels(), shape, seqs, q.data(), row, kv, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  bandwidth.Sample();
  // Bytes processed count every sequence's whole context, as if none were shared; the roof
  // counts the bytes read, shared blocks once.
  const double token_bytes = 2.0 * shape.num_kv_heads * KvRowBytes(dtype, shape.head_dim);
  const double tokens_read = static_cast<double>(num_seqs - 1) * (ctx - shared_tokens) + ctx;
  state.SetLabel(KvDtypeName(dtype));
  state.SetBytesProcessed(
      static_cast<int64_t>(token_bytes * num_seqs * ctx * static_cast<double>(state.iterations())));
  state.counters["roof"] = benchmark::Counter(
      token_bytes * tokens_read * static_cast<double>(state.iterations()) / (bandwidth.gbs() * 1e9),
      benchmark::Counter::kIsRate);
  state.counters["read_GBps"] = bandwidth.gbs();
  // q·k and p·v: 2 · head_dim multiply-adds per query head and token, 2 flops each.
  const double flops = 4.0 * shape.num_heads * shape.head_dim * ctx * num_seqs;
  state.counters["fma_share"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / (PeakGflops() * 1e9),
                         benchmark::Counter::kIsRate);
}

// One sequence's chunk of `rows` query rows at positions [ctx - rows, ctx), each seeing every
// position before it: `fma_share` counts the multiply-adds of the causal scores and P·V.
void RunPrefillAttention(benchmark::State& state, const AttentionShape& shape, int rows, int ctx,
                         KvDtype dtype) {
  const int num_blocks = (ctx + shape.block_size - 1) / shape.block_size;
  const size_t runs = static_cast<size_t>(num_blocks) * shape.num_kv_heads;
  const HugePageBuffer k = RandomPool(runs, shape, dtype, 1);
  const HugePageBuffer v = RandomPool(runs, shape, dtype, 2);
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
  const AttentionSequence seq{0, rows, ctx - rows, ids.data()};
  const int row = shape.num_heads * shape.head_dim;
  std::vector<float> q(static_cast<size_t>(rows) * row), out(q.size());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : q) x = dist(rng);
  const KvLayerView kv{k.data(), v.data(), dtype};
  for (auto _ : state) {
    PagedAttention(ActiveKernels(), shape, std::span(&seq, 1), q.data(), row, kv, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  // Row r sees ctx - rows + r + 1 positions.
  const double seen = static_cast<double>(rows) * (ctx - rows) + rows * (rows + 1) / 2.0;
  const double flops = 4.0 * shape.num_heads * shape.head_dim * seen;
  state.SetLabel(KvDtypeName(dtype));
  state.counters["fma_share"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / (PeakGflops() * 1e9),
                         benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_PrefillAttention1B(benchmark::State& state) {
  RunPrefillAttention(state, AttentionShape{32, 4, 64, 16}, 512, static_cast<int>(state.range(0)),
                      static_cast<KvDtype>(state.range(1)));
}

void BM_DecodeAttention(benchmark::State& state) {
  RunDecodeAttention(state, AttentionShape{12, 12, 64, 16}, static_cast<int>(state.range(0)),
                     static_cast<int>(state.range(1)), static_cast<KvDtype>(state.range(2)),
                     static_cast<int>(state.range(3)));
}

void BM_DecodeAttention1B(benchmark::State& state) {
  RunDecodeAttention(state, AttentionShape{32, 4, 64, 16}, static_cast<int>(state.range(0)),
                     static_cast<int>(state.range(1)), static_cast<KvDtype>(state.range(2)), 0);
}

BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{1}, {512}, {0, 1, 2}, {0}})
    ->ArgsProduct({{32}, {133, 512}, {0, 1, 2}, {0}})
    ->ArgsProduct({{32}, {512}, {0, 1, 2}, {352}});
BENCHMARK(BM_PrefillAttention1B)
    ->ArgsProduct({{512, 4096, 8192}, {0, 1, 3}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DecodeAttention1B)
    ->ArgsProduct({{1, 8}, {512, 4096, 8192, 16384}, {0, 1, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
