// Paged attention alone, in the decode shape of stories110M (12 heads of 64, block 16):
//   BM_DecodeAttention/S/C/D/P S sequences, one query each, C tokens of context, K/V stored as
//                              D (0 = f32, 1 = bf16, 2 = f16; the label names it), the first
//                              P tokens' blocks shared by all (a common system prompt)
// Reports the K/V bytes read per second (the kernel's roof is memory bandwidth).
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/isa.h"
#include "worker/kv_dtype.h"
#include "worker/paged_attention.h"

namespace pagoda {
namespace {

// A pool of `n` elements of `dtype`, all equal to `value`.
HugePageBuffer FilledPool(size_t n, KvDtype dtype, float value) {
  HugePageBuffer pool((n * KvDtypeBytes(dtype) + sizeof(float) - 1) / sizeof(float));
  const std::vector<float> values(n, value);
  ConvertFromFloat(values.data(), static_cast<int>(n), dtype, pool.data());
  return pool;
}

void BM_DecodeAttention(benchmark::State& state) {
  const int num_seqs = static_cast<int>(state.range(0)), ctx = static_cast<int>(state.range(1));
  const auto dtype = static_cast<KvDtype>(state.range(2));
  const AttentionShape shape{12, 12, 64, 16};
  const int blocks_per_seq = (ctx + shape.block_size - 1) / shape.block_size;
  const int num_blocks = num_seqs * blocks_per_seq;
  const size_t block_elems = static_cast<size_t>(shape.num_kv_heads) * shape.block_size * 64;
  const HugePageBuffer k = FilledPool(num_blocks * block_elems, dtype, 0.01f);
  const HugePageBuffer v = FilledPool(num_blocks * block_elems, dtype, 0.02f);
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));  // scattered, as in a busy pool
  // The first `shared` tokens' blocks are the same for every sequence (one system prompt, in
  // the prefix cache): every table starts with sequence 0's.
  const int shared_blocks = static_cast<int>(state.range(3)) / shape.block_size;
  for (int s = 1; s < num_seqs; ++s) {
    std::copy_n(ids.begin(), shared_blocks, ids.begin() + s * blocks_per_seq);
  }
  std::vector<AttentionSequence> seqs;
  for (int s = 0; s < num_seqs; ++s) {
    seqs.push_back({s, 1, ctx - 1, &ids[s * blocks_per_seq]});
  }
  std::vector<float> q(num_seqs * 768, 0.1f), out(num_seqs * 768);
  const KvLayerView kv{k.data(), v.data(), dtype};
  for (auto _ : state) {
    PagedAttention(ActiveKernels(), shape, seqs, q.data(), 768, kv, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(KvDtypeName(dtype));
  state.SetBytesProcessed(state.iterations() * num_seqs * static_cast<int64_t>(ctx) * 768 * 2 *
                          KvDtypeBytes(dtype));
}

BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{1}, {512}, {0, 1, 2}, {0}})
    ->ArgsProduct({{32}, {133, 512}, {0, 1, 2}, {0}})
    ->ArgsProduct({{32}, {512}, {0, 1, 2}, {352}});

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
