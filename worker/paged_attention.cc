#include "worker/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <vector>

namespace pagoda {
namespace {

// Query rows of one sequence handled together, sharing every K/V block load.
constexpr int kTileRows = 16;

// Rows [row_begin, row_end) of a sequence against KV heads [head_begin, head_end). A block's
// heads are contiguous in the pool, so one item reads each block as one run.
struct WorkItem {
  int seq;
  int head_begin, head_end;
  int row_begin, row_end;
};

}  // namespace

void PagedAttention(const Kernels& kernels, const AttentionShape& shape,
                    std::span<const AttentionSequence> seqs, const float* q, int q_stride,
                    const KvLayerView& kv, float* out) {
  // Reused across calls: grows to the largest step once, then never allocates.
  static thread_local std::vector<WorkItem> items;
  items.clear();
  int num_tiles = 0;
  for (const AttentionSequence& seq : seqs) num_tiles += (seq.num_rows + kTileRows - 1) / kTileRows;
  // Whole sequences per item when there is enough work; otherwise split the heads so every
  // thread has some (a lone decode would else run on one core).
  const int wanted = 4 * omp_get_max_threads();
  const int splits =
      std::clamp((wanted + num_tiles - 1) / std::max(num_tiles, 1), 1, shape.num_kv_heads);
  for (int s = 0; s < static_cast<int>(seqs.size()); ++s) {
    for (int part = 0; part < splits; ++part) {
      const int h0 = shape.num_kv_heads * part / splits;
      const int h1 = shape.num_kv_heads * (part + 1) / splits;
      for (int r = 0; r < seqs[s].num_rows; r += kTileRows) {
        items.push_back({s, h0, h1, r, std::min(r + kTileRows, seqs[s].num_rows)});
      }
    }
  }
  const int n = static_cast<int>(items.size());
  const WorkItem* work = items.data();
#pragma omp parallel
  {
    static thread_local std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      const WorkItem& item = work[i];
      const AttentionSequence& seq = seqs[item.seq];
      const int query_heads =
          (item.head_end - item.head_begin) * (shape.num_heads / shape.num_kv_heads);
      scratch.resize(AttentionScratchFloats(item.row_end - item.row_begin, query_heads,
                                            shape.head_dim, shape.block_size));
      kernels.attention(
          {.num_heads = shape.num_heads,
           .num_kv_heads = shape.num_kv_heads,
           .head_dim = shape.head_dim,
           .block_size = shape.block_size,
           .start_pos = seq.start_pos,
           .row_begin = item.row_begin,
           .row_end = item.row_end,
           .head_begin = item.head_begin,
           .head_end = item.head_end,
           .block_table = seq.block_table,
           .q = q + static_cast<size_t>(seq.first_row) * q_stride,
           .q_stride = q_stride,
           .k_pool = kv.k,
           .v_pool = kv.v,
           .out = out + static_cast<size_t>(seq.first_row) * shape.num_heads * shape.head_dim,
           .scratch = scratch.data(),
           .kv_dtype = kv.dtype});
    }
  }
}

}  // namespace pagoda
