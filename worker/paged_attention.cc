#include "worker/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pagoda {
namespace {

// Query rows of one sequence handled together, sharing every K/V block load.
constexpr int kTileRows = 16;

struct WorkItem {
  int seq;
  int kv_head;
  int row_begin, row_end;  // rows of the sequence, [begin, end)
};

inline float Dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// One work item: rows [row_begin, row_end) x the query heads of one KV head.
void AttendTile(const AttentionShape& shape, const AttentionSequence& seq, const WorkItem& item,
                const float* q, int q_stride, const float* k_pool, const float* v_pool, float* out,
                std::vector<float>& scratch) {
  const int hd = shape.head_dim, bs = shape.block_size;
  const int group = shape.num_heads / shape.num_kv_heads;
  const int rows = item.row_end - item.row_begin;
  const int states = rows * group;
  // scratch: m (states) | l (states) | acc (states, hd) | scores (bs)
  scratch.resize(static_cast<size_t>(states) * (hd + 2) + bs);
  float* m = scratch.data();
  float* l = m + states;
  float* acc = l + states;
  float* scores = acc + static_cast<size_t>(states) * hd;
  std::fill(m, m + states, -std::numeric_limits<float>::infinity());
  std::fill(l, l + states + static_cast<size_t>(states) * hd, 0.0f);

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int last_pos = seq.start_pos + item.row_end - 1;
  const int num_blocks = last_pos / bs + 1;
  const size_t block_stride = static_cast<size_t>(shape.num_kv_heads) * bs * hd;
  for (int b = 0; b < num_blocks; ++b) {
    const size_t at =
        seq.block_table[b] * block_stride + static_cast<size_t>(item.kv_head) * bs * hd;
    const float* kb = k_pool + at;  // (bs, hd)
    const float* vb = v_pool + at;  // (bs, hd)
    const int base = b * bs;
    for (int r = item.row_begin; r < item.row_end; ++r) {
      const int n = std::min(bs, seq.start_pos + r - base + 1);  // causal limit in this block
      if (n <= 0) continue;
      const float* q_row = q + static_cast<size_t>(seq.first_row + r) * q_stride;
      for (int g = 0; g < group; ++g) {
        const float* qv = q_row + (item.kv_head * group + g) * hd;
        float block_max = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < n; ++j) {
          scores[j] = Dot(qv, kb + j * hd, hd) * scale;
          block_max = std::max(block_max, scores[j]);
        }
        const int s = (r - item.row_begin) * group + g;
        float* o = acc + static_cast<size_t>(s) * hd;
        const float m_new = std::max(m[s], block_max);
        const float correction = std::exp(m[s] - m_new);  // 0 on the first block
        float sum = l[s] * correction;
        if (correction != 1.0f) {
#pragma omp simd
          for (int d = 0; d < hd; ++d) o[d] *= correction;
        }
        for (int j = 0; j < n; ++j) {
          const float p = std::exp(scores[j] - m_new);
          sum += p;
          const float* vj = vb + j * hd;
#pragma omp simd
          for (int d = 0; d < hd; ++d) o[d] += p * vj[d];
        }
        m[s] = m_new;
        l[s] = sum;
      }
    }
  }
  const int out_stride = shape.num_heads * hd;
  for (int r = item.row_begin; r < item.row_end; ++r) {
    for (int g = 0; g < group; ++g) {
      const int s = (r - item.row_begin) * group + g;
      const float inv = 1.0f / l[s];
      float* dst = out + static_cast<size_t>(seq.first_row + r) * out_stride +
                   (item.kv_head * group + g) * hd;
      const float* o = acc + static_cast<size_t>(s) * hd;
      for (int d = 0; d < hd; ++d) dst[d] = o[d] * inv;
    }
  }
}

}  // namespace

void PagedAttention(const AttentionShape& shape, std::span<const AttentionSequence> seqs,
                    const float* q, int q_stride, const float* k_pool, const float* v_pool,
                    float* out) {
  // Reused across calls: grows to the largest step once, then never allocates.
  static thread_local std::vector<WorkItem> items;
  items.clear();
  for (int s = 0; s < static_cast<int>(seqs.size()); ++s) {
    for (int h = 0; h < shape.num_kv_heads; ++h) {
      for (int r = 0; r < seqs[s].num_rows; r += kTileRows) {
        items.push_back({s, h, r, std::min(r + kTileRows, seqs[s].num_rows)});
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
      AttendTile(shape, seqs[work[i].seq], work[i], q, q_stride, k_pool, v_pool, out, scratch);
    }
  }
}

}  // namespace pagoda
