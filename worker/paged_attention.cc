#include "worker/paged_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "worker/simd.h"

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

inline float Dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// scores[j] = q · k_j · scale for the first n keys of a block (k: (n, hd)); returns the max.
inline float Scores(const float* q, const float* k, int n, int hd, float scale, float* scores) {
  float max = -std::numeric_limits<float>::infinity();
#if defined(__AVX2__) && defined(__FMA__)
  if (hd % 8 == 0) {
    int j = 0;
    // Four keys at a time: four independent FMA chains, q loaded once for all four.
    for (; j + 4 <= n; j += 4) {
      const float* k0 = k + j * hd;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int d = 0; d < hd; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + hd + d), a1);
        a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 2 * hd + d), a2);
        a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 3 * hd + d), a3);
      }
      // [a0 a1 a2 a3] lane sums: two rounds of hadd, then the two 128-bit halves.
      const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
      const __m128 sums = _mm_mul_ps(
          _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), _mm_set1_ps(scale));
      _mm_storeu_ps(scores + j, sums);
      max = std::max(max, std::max(std::max(scores[j], scores[j + 1]),
                                   std::max(scores[j + 2], scores[j + 3])));
    }
    for (; j < n; ++j) {
      const float* kj = k + j * hd;
      __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(kj));
      for (int d = 8; d < hd; d += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kj + d), acc);
      }
      scores[j] = HorizontalSum(acc) * scale;
      max = std::max(max, scores[j]);
    }
    return max;
  }
#endif
  for (int j = 0; j < n; ++j) {
    scores[j] = Dot(q, k + j * hd, hd) * scale;
    max = std::max(max, scores[j]);
  }
  return max;
}

// scores[j] = e^(scores[j] - m) for j < n (n <= block size); returns their sum.
inline float ExpShifted(float* scores, int n, float m) {
  float sum = 0.0f;
  int j = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(scores + j), _mm256_set1_ps(m)));
    _mm256_storeu_ps(scores + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  sum = HorizontalSum(acc);
#endif
  for (; j < n; ++j) sum += (scores[j] = std::exp(scores[j] - m));
  return sum;
}

// o = o · correction + Σ_j p_j v_j over the first n values of a block (v: (n, hd)).
inline void AccumulateValues(const float* p, const float* v, int n, int hd, float correction,
                             float* o) {
#if defined(__AVX2__) && defined(__FMA__)
  if (hd % 8 == 0) {
    const __m256 c = _mm256_set1_ps(correction);
    int d = 0;
    // 32 outputs at a time: each broadcast of p_j feeds four FMAs.
    for (; d + 32 <= hd; d += 32) {
      __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(o + d), c);
      __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8), c);
      __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 16), c);
      __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 24), c);
      for (int j = 0; j < n; ++j) {
        const __m256 pj = _mm256_set1_ps(p[j]);
        const float* vj = v + j * hd + d;
        a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj), a0);
        a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8), a1);
        a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 16), a2);
        a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 24), a3);
      }
      _mm256_storeu_ps(o + d, a0);
      _mm256_storeu_ps(o + d + 8, a1);
      _mm256_storeu_ps(o + d + 16, a2);
      _mm256_storeu_ps(o + d + 24, a3);
    }
    for (; d < hd; d += 8) {
      __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(o + d), c);
      for (int j = 0; j < n; ++j) {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * hd + d), acc);
      }
      _mm256_storeu_ps(o + d, acc);
    }
    return;
  }
#endif
  for (int d = 0; d < hd; ++d) o[d] *= correction;
  for (int j = 0; j < n; ++j) {
#pragma omp simd
    for (int d = 0; d < hd; ++d) o[d] += p[j] * v[j * hd + d];
  }
}

// One work item: its rows x the query heads of its KV heads, merged block by block.
void AttendTile(const AttentionShape& shape, const AttentionSequence& seq, const WorkItem& item,
                const float* q, int q_stride, const float* k_pool, const float* v_pool, float* out,
                std::vector<float>& scratch) {
  const int hd = shape.head_dim, bs = shape.block_size;
  const int group = shape.num_heads / shape.num_kv_heads;
  const int rows = item.row_end - item.row_begin;
  const int heads = (item.head_end - item.head_begin) * group;  // query heads of this item
  const int states = rows * heads;  // state s = (row - row_begin) * heads + query head offset
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
  const size_t head_stride = static_cast<size_t>(bs) * hd;
  const size_t block_stride = shape.num_kv_heads * head_stride;
  const size_t run_bytes = (item.head_end - item.head_begin) * head_stride * sizeof(float);
  for (int b = 0; b < num_blocks; ++b) {
    if (b + 1 < num_blocks) {
      // Blocks are scattered: fetch the next one's run while this one is computed.
      const size_t next = seq.block_table[b + 1] * block_stride + item.head_begin * head_stride;
      const char* nk = reinterpret_cast<const char*>(k_pool + next);
      const char* nv = reinterpret_cast<const char*>(v_pool + next);
      for (size_t off = 0; off < run_bytes; off += 64) {
        _mm_prefetch(nk + off, _MM_HINT_T0);
        _mm_prefetch(nv + off, _MM_HINT_T0);
      }
    }
    const int base = b * bs;
    for (int h = item.head_begin; h < item.head_end; ++h) {
      const size_t at = seq.block_table[b] * block_stride + h * head_stride;
      const float* kb = k_pool + at;  // (bs, hd)
      const float* vb = v_pool + at;  // (bs, hd)
      for (int r = item.row_begin; r < item.row_end; ++r) {
        const int n = std::min(bs, seq.start_pos + r - base + 1);  // causal limit in this block
        if (n <= 0) continue;
        const float* q_row = q + static_cast<size_t>(seq.first_row + r) * q_stride;
        for (int g = 0; g < group; ++g) {
          const int qh = h * group + g;
          const int s = (r - item.row_begin) * heads + (qh - item.head_begin * group);
          const float block_max = Scores(q_row + qh * hd, kb, n, hd, scale, scores);
          const float m_new = std::max(m[s], block_max);
          const float correction = std::exp(m[s] - m_new);  // 0 on the first block
          l[s] = l[s] * correction + ExpShifted(scores, n, m_new);
          AccumulateValues(scores, vb, n, hd, correction, acc + static_cast<size_t>(s) * hd);
          m[s] = m_new;
        }
      }
    }
  }
  const int out_stride = shape.num_heads * hd;
  for (int r = item.row_begin; r < item.row_end; ++r) {
    for (int i = 0; i < heads; ++i) {
      const int s = (r - item.row_begin) * heads + i;
      const float inv = 1.0f / l[s];
      float* dst = out + static_cast<size_t>(seq.first_row + r) * out_stride +
                   (item.head_begin * group + i) * hd;
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
      AttendTile(shape, seqs[work[i].seq], work[i], q, q_stride, k_pool, v_pool, out, scratch);
    }
  }
}

}  // namespace pagoda
