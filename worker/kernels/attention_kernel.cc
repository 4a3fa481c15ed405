// Paged attention over one tile (rows of one sequence x a range of its KV heads) for one ISA:
// the online-softmax merge that worker/paged_attention.h describes, block by block.
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr float kNegInf = -__builtin_inff();

// scores[j] = q · k_j · scale for the first n keys of a block (k: (n, hd)); returns the max.
float Scores(const float* q, const float* k, int n, int hd, float scale, float* scores) {
  float max = kNegInf;
  int j = 0;
  if (hd % kWidth == 0) {
    // Four keys at a time: four independent FMA chains, q loaded once for all four.
    for (; j + 4 <= n; j += 4) {
      const float* k0 = k + j * hd;
      V a0 = Zero(), a1 = a0, a2 = a0, a3 = a0;
      for (int d = 0; d < hd; d += kWidth) {
        const V qd = Load(q + d);
        a0 = Fma(qd, Load(k0 + d), a0);
        a1 = Fma(qd, Load(k0 + hd + d), a1);
        a2 = Fma(qd, Load(k0 + 2 * hd + d), a2);
        a3 = Fma(qd, Load(k0 + 3 * hd + d), a3);
      }
      _mm_storeu_ps(scores + j, _mm_mul_ps(Reduce4(a0, a1, a2, a3), _mm_set1_ps(scale)));
      max = MaxFloat(max, MaxFloat(MaxFloat(scores[j], scores[j + 1]),
                                   MaxFloat(scores[j + 2], scores[j + 3])));
    }
  }
  for (; j < n; ++j) {
    const float* kj = k + j * hd;
    float sum = 0.0f;
    for (int d = 0; d < hd; ++d) sum += q[d] * kj[d];
    scores[j] = sum * scale;
    max = MaxFloat(max, scores[j]);
  }
  return max;
}

// scores[j] = e^(scores[j] - m) for j < n; returns their sum.
float ExpShifted(float* scores, int n, float m) {
  int j = 0;
  V acc = Zero();
  for (; j + kWidth <= n; j += kWidth) {
    const V e = Exp(Sub(Load(scores + j), Set1(m)));
    Store(scores + j, e);
    acc = Add(acc, e);
  }
  float sum = ReduceAdd(acc);
  for (; j < n; ++j) sum += (scores[j] = __builtin_expf(scores[j] - m));
  return sum;
}

// o = o · correction + Σ_j p_j v_j over the first n values of a block (v: (n, hd)).
void AccumulateValues(const float* p, const float* v, int n, int hd, float correction, float* o) {
  if (hd % kWidth != 0) {
    for (int d = 0; d < hd; ++d) o[d] *= correction;
    for (int j = 0; j < n; ++j) {
      for (int d = 0; d < hd; ++d) o[d] += p[j] * v[j * hd + d];
    }
    return;
  }
  const V c = Set1(correction);
  int d = 0;
  // Four vectors of outputs at a time: each broadcast of p_j feeds four FMAs.
  for (; d + 4 * kWidth <= hd; d += 4 * kWidth) {
    V a0 = Mul(Load(o + d), c), a1 = Mul(Load(o + d + kWidth), c);
    V a2 = Mul(Load(o + d + 2 * kWidth), c), a3 = Mul(Load(o + d + 3 * kWidth), c);
    for (int j = 0; j < n; ++j) {
      const V pj = Set1(p[j]);
      const float* vj = v + j * hd + d;
      a0 = Fma(pj, Load(vj), a0);
      a1 = Fma(pj, Load(vj + kWidth), a1);
      a2 = Fma(pj, Load(vj + 2 * kWidth), a2);
      a3 = Fma(pj, Load(vj + 3 * kWidth), a3);
    }
    Store(o + d, a0);
    Store(o + d + kWidth, a1);
    Store(o + d + 2 * kWidth, a2);
    Store(o + d + 3 * kWidth, a3);
  }
  for (; d < hd; d += kWidth) {
    V acc = Mul(Load(o + d), c);
    for (int j = 0; j < n; ++j) acc = Fma(Set1(p[j]), Load(v + j * hd + d), acc);
    Store(o + d, acc);
  }
}

}  // namespace

void Attention(const AttentionTile& t) {
  const int hd = t.head_dim, bs = t.block_size;
  const int group = t.num_heads / t.num_kv_heads;
  const int rows = t.row_end - t.row_begin;
  const int heads = (t.head_end - t.head_begin) * group;  // query heads of this tile
  const int states = rows * heads;  // state s = (row - row_begin) * heads + query head offset
  // scratch: m (states) | l (states) | acc (states, hd) | scores (bs)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  float* scores = acc + static_cast<long>(states) * hd;
  for (int s = 0; s < states; ++s) m[s] = kNegInf;
  for (long i = 0; i < states + static_cast<long>(states) * hd; ++i) l[i] = 0.0f;

  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  const int last_pos = t.start_pos + t.row_end - 1;
  const int num_blocks = last_pos / bs + 1;
  const long head_stride = static_cast<long>(bs) * hd;
  const long block_stride = t.num_kv_heads * head_stride;
  const long run_bytes = (t.head_end - t.head_begin) * head_stride * sizeof(float);
  for (int b = 0; b < num_blocks; ++b) {
    if (b + 1 < num_blocks) {
      // Blocks are scattered: fetch the next one's run while this one is computed.
      const long next = t.block_table[b + 1] * block_stride + t.head_begin * head_stride;
      const char* nk = reinterpret_cast<const char*>(t.k_pool + next);
      const char* nv = reinterpret_cast<const char*>(t.v_pool + next);
      for (long off = 0; off < run_bytes; off += 64) {
        _mm_prefetch(nk + off, _MM_HINT_T0);
        _mm_prefetch(nv + off, _MM_HINT_T0);
      }
    }
    const int base = b * bs;
    for (int h = t.head_begin; h < t.head_end; ++h) {
      const long at = t.block_table[b] * block_stride + h * head_stride;
      const float* kb = t.k_pool + at;  // (bs, hd)
      const float* vb = t.v_pool + at;  // (bs, hd)
      for (int r = t.row_begin; r < t.row_end; ++r) {
        const int n = MinInt(bs, t.start_pos + r - base + 1);  // causal limit in this block
        if (n <= 0) continue;
        const float* q_row = t.q + static_cast<long>(r) * t.q_stride;
        for (int g = 0; g < group; ++g) {
          const int qh = h * group + g;
          const int s = (r - t.row_begin) * heads + (qh - t.head_begin * group);
          const float block_max = Scores(q_row + qh * hd, kb, n, hd, scale, scores);
          const float m_new = MaxFloat(m[s], block_max);
          const float correction = __builtin_expf(m[s] - m_new);  // 0 on the first block
          l[s] = l[s] * correction + ExpShifted(scores, n, m_new);
          AccumulateValues(scores, vb, n, hd, correction, acc + static_cast<long>(s) * hd);
          m[s] = m_new;
        }
      }
    }
  }
  const int out_stride = t.num_heads * hd;
  for (int r = t.row_begin; r < t.row_end; ++r) {
    for (int i = 0; i < heads; ++i) {
      const int s = (r - t.row_begin) * heads + i;
      const float inv = 1.0f / l[s];
      float* dst = t.out + static_cast<long>(r) * out_stride + (t.head_begin * group + i) * hd;
      const float* o = acc + static_cast<long>(s) * hd;
      for (int d = 0; d < hd; ++d) dst[d] = o[d] * inv;
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
