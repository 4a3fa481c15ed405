// Paged attention alone, in the decode shape of stories110M (12 heads of 64, block 16):
//   BM_DecodeAttention/S/C   S sequences, one query each, C tokens of context
// Reports the K/V bytes read per second (the kernel's roof is memory bandwidth).
#include <numeric>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/isa.h"
#include "worker/paged_attention.h"

namespace pagoda {
namespace {

void BM_DecodeAttention(benchmark::State& state) {
  const int num_seqs = static_cast<int>(state.range(0)), ctx = static_cast<int>(state.range(1));
  const AttentionShape shape{12, 12, 64, 16};
  const int blocks_per_seq = (ctx + shape.block_size - 1) / shape.block_size;
  const int num_blocks = num_seqs * blocks_per_seq;
  const size_t block_floats = static_cast<size_t>(shape.num_kv_heads) * shape.block_size * 64;
  HugePageBuffer k(num_blocks * block_floats), v(num_blocks * block_floats);
  std::fill(k.data(), k.data() + k.size(), 0.01f);
  std::fill(v.data(), v.data() + v.size(), 0.02f);
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));  // scattered, as in a busy pool
  std::vector<AttentionSequence> seqs;
  for (int s = 0; s < num_seqs; ++s) {
    seqs.push_back({s, 1, ctx - 1, &ids[s * blocks_per_seq]});
  }
  std::vector<float> q(num_seqs * 768, 0.1f), out(num_seqs * 768);
  for (auto _ : state) {
    PagedAttention(ActiveKernels(), shape, seqs, q.data(), 768, k.data(), v.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * num_seqs * static_cast<int64_t>(ctx) * 768 * 2 * 4);
}

BENCHMARK(BM_DecodeAttention)->Args({1, 512})->Args({32, 133})->Args({32, 512});

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
