// Paged attention over one tile (rows of one sequence x a range of its KV heads) for one ISA:
// the online-softmax merge that worker/paged_attention.h describes, block by block. K and V may
// be stored in 16 bits or int8: a block's rows are widened to f32 once per KV head (int8 rows
// times their scale), for every query head of its group and every row to read from L1, and all
// arithmetic is f32. The query heads
// of a group go two at a time (GQA): each K/V load feeds two FMA chains, and twice the chains
// hide the FMA latency; each head's sums keep a lone head's order, so the result is the same
// bit for bit.
#include <cstdint>
#include <type_traits>

#include "worker/kernels/attention_states.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/kv_rows.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr float kNegInf = -__builtin_inff();

// scores[j] = q · k_j · scale for keys [j, n) of a block (k: (n, hd)), one at a time; returns
// the max of them and `max`.
[[gnu::always_inline]] inline float ScoresOneByOne(const float* q, const float* k, int j, int n,
                                                   int hd, float scale, float* scores, float max) {
  for (; j < n; ++j) {
    const float* kj = k + j * hd;
    float sum = 0.0f;
    for (int d = 0; d < hd; ++d) sum += q[d] * kj[d];
    scores[j] = sum * scale;
    max = MaxFloat(max, scores[j]);
  }
  return max;
}

// Four keys' scores from their accumulators into scores[j..j+3]; returns their max and `max`.
[[gnu::always_inline]] inline float StoreFour(V a0, V a1, V a2, V a3, float scale, float* scores,
                                              float max) {
  _mm_storeu_ps(scores, _mm_mul_ps(Reduce4(a0, a1, a2, a3), _mm_set1_ps(scale)));
  return MaxFloat(max, MaxFloat(MaxFloat(scores[0], scores[1]), MaxFloat(scores[2], scores[3])));
}

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
      max = StoreFour(a0, a1, a2, a3, scale, scores + j, max);
    }
  }
  return ScoresOneByOne(q, k, j, n, hd, scale, scores, max);
}

// Scores of two query heads q0, q1 against the same keys, each exactly as Scores computes it
// (the same sums in the same order): eight FMA chains, each key row loaded once for both.
// REQUIRES: hd % kWidth == 0.
void ScoresOfTwo(const float* q0, const float* q1, const float* k, int n, int hd, float scale,
                 float* scores0, float* scores1, float* max0, float* max1) {
  float m0 = kNegInf, m1 = kNegInf;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* k0 = k + j * hd;
    V a0 = Zero(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int d = 0; d < hd; d += kWidth) {
      const V x0 = Load(q0 + d), x1 = Load(q1 + d);
      V kd = Load(k0 + d);
      a0 = Fma(x0, kd, a0);
      b0 = Fma(x1, kd, b0);
      kd = Load(k0 + hd + d);
      a1 = Fma(x0, kd, a1);
      b1 = Fma(x1, kd, b1);
      kd = Load(k0 + 2 * hd + d);
      a2 = Fma(x0, kd, a2);
      b2 = Fma(x1, kd, b2);
      kd = Load(k0 + 3 * hd + d);
      a3 = Fma(x0, kd, a3);
      b3 = Fma(x1, kd, b3);
    }
    m0 = StoreFour(a0, a1, a2, a3, scale, scores0 + j, m0);
    m1 = StoreFour(b0, b1, b2, b3, scale, scores1 + j, m1);
  }
  *max0 = ScoresOneByOne(q0, k, j, n, hd, scale, scores0, m0);
  *max1 = ScoresOneByOne(q1, k, j, n, hd, scale, scores1, m1);
}

// scores[j] = e^(scores[j] - m) for j < n; returns their sum.
// Inlined into each element type's loop, as it was when there was one.
[[gnu::always_inline]] inline float ExpShifted(float* scores, int n, float m) {
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

// AccumulateValues for two query heads over the same values, each exactly as it alone: eight
// FMA chains, each value row loaded once for both. REQUIRES: hd % kWidth == 0.
void AccumulateValuesOfTwo(const float* p0, const float* p1, const float* v, int n, int hd,
                           float correction0, float correction1, float* o0, float* o1) {
  const V c0 = Set1(correction0), c1 = Set1(correction1);
  int d = 0;
  for (; d + 4 * kWidth <= hd; d += 4 * kWidth) {
    V a0 = Mul(Load(o0 + d), c0), a1 = Mul(Load(o0 + d + kWidth), c0);
    V a2 = Mul(Load(o0 + d + 2 * kWidth), c0), a3 = Mul(Load(o0 + d + 3 * kWidth), c0);
    V b0 = Mul(Load(o1 + d), c1), b1 = Mul(Load(o1 + d + kWidth), c1);
    V b2 = Mul(Load(o1 + d + 2 * kWidth), c1), b3 = Mul(Load(o1 + d + 3 * kWidth), c1);
    for (int j = 0; j < n; ++j) {
      const V x0 = Set1(p0[j]), x1 = Set1(p1[j]);
      const float* vj = v + j * hd + d;
      V vd = Load(vj);
      a0 = Fma(x0, vd, a0);
      b0 = Fma(x1, vd, b0);
      vd = Load(vj + kWidth);
      a1 = Fma(x0, vd, a1);
      b1 = Fma(x1, vd, b1);
      vd = Load(vj + 2 * kWidth);
      a2 = Fma(x0, vd, a2);
      b2 = Fma(x1, vd, b2);
      vd = Load(vj + 3 * kWidth);
      a3 = Fma(x0, vd, a3);
      b3 = Fma(x1, vd, b3);
    }
    Store(o0 + d, a0);
    Store(o0 + d + kWidth, a1);
    Store(o0 + d + 2 * kWidth, a2);
    Store(o0 + d + 3 * kWidth, a3);
    Store(o1 + d, b0);
    Store(o1 + d + kWidth, b1);
    Store(o1 + d + 2 * kWidth, b2);
    Store(o1 + d + 3 * kWidth, b3);
  }
  for (; d < hd; d += kWidth) {
    V a = Mul(Load(o0 + d), c0), b = Mul(Load(o1 + d), c1);
    for (int j = 0; j < n; ++j) {
      const V vd = Load(v + j * hd + d);
      a = Fma(Set1(p0[j]), vd, a);
      b = Fma(Set1(p1[j]), vd, b);
    }
    Store(o0 + d, a);
    Store(o1 + d, b);
  }
}

// One state's merge of a block whose scores are in `scores` (n of them, max block_max).
[[gnu::always_inline]] inline float Rescale(float block_max, float* scores, int n, float* m,
                                            float* l) {
  const float m_new = MaxFloat(*m, block_max);
  const float correction = __builtin_expf(*m - m_new);  // 0 on the first block
  *l = *l * correction + ExpShifted(scores, n, m_new);
  *m = m_new;
  return correction;
}

template <typename T>
void AttentionOf(const AttentionTile& t) {
  using Elem = typename T::Elem;
  const Elem* k_pool = static_cast<const Elem*>(t.k_pool);
  const Elem* v_pool = static_cast<const Elem*>(t.v_pool);
  const int hd = t.head_dim, bs = t.block_size;
  const int group = t.num_heads / t.num_kv_heads;
  const int rows = t.row_end - t.row_begin;
  const int heads = (t.head_end - t.head_begin) * group;  // query heads of this tile
  const int states = rows * heads;  // state s = (row - row_begin) * heads + query head offset
  // scratch: m (states) | l (states) | acc (states, hd) | scores (2, bs) | widened K, V (bs, hd)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  float* scores0 = acc + static_cast<long>(states) * hd;
  float* scores1 = scores0 + bs;
  float* k_wide = scores1 + bs;
  float* v_wide = k_wide + static_cast<long>(bs) * hd;
  StartStates(t, states, m);

  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  const bool pairs = hd % kWidth == 0;
  ForEachRun<T>(t, [&](int base, int keys, int h, long at) {
    const float* kb;  // (keys, hd)
    const float* vb;  // (keys, hd)
    RowsOf<T>(k_pool, v_pool, at, keys, hd, bs, k_wide, v_wide, &kb, &vb);
    for (int r = t.row_begin; r < t.row_end; ++r) {
      const int n = MinInt(bs, t.start_pos + r - base + 1);  // causal limit in this block
      if (n <= 0) continue;
      const float* q_row = t.q + static_cast<long>(r) * t.q_stride;
      const int s_first = (r - t.row_begin) * heads + (h - t.head_begin) * group;
      int g = 0;
      for (; pairs && g + 2 <= group; g += 2) {
        const int s = s_first + g;
        const float* q0 = q_row + (h * group + g) * hd;
        float max0, max1;
        ScoresOfTwo(q0, q0 + hd, kb, n, hd, scale, scores0, scores1, &max0, &max1);
        const float c0 = Rescale(max0, scores0, n, &m[s], &l[s]);
        const float c1 = Rescale(max1, scores1, n, &m[s + 1], &l[s + 1]);
        AccumulateValuesOfTwo(scores0, scores1, vb, n, hd, c0, c1, acc + static_cast<long>(s) * hd,
                              acc + static_cast<long>(s + 1) * hd);
      }
      for (; g < group; ++g) {
        const int s = s_first + g;
        const float block_max = Scores(q_row + (h * group + g) * hd, kb, n, hd, scale, scores0);
        const float c = Rescale(block_max, scores0, n, &m[s], &l[s]);
        AccumulateValues(scores0, vb, n, hd, c, acc + static_cast<long>(s) * hd);
      }
    }
  });
  FinishStates(t, heads, l, acc);
}

}  // namespace

void Attention(const AttentionTile& t) {
  switch (t.kv_dtype) {
    case KvDtype::kF32:
      return AttentionOf<F32>(t);
    case KvDtype::kBf16:
      return AttentionOf<Bf16>(t);
    case KvDtype::kF16:
      return AttentionOf<F16>(t);
    case KvDtype::kInt8:
      return AttentionOf<Int8>(t);
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
