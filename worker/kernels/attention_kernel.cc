// Paged attention over one tile (rows of one sequence x a range of its KV heads) for one ISA:
// the online-softmax merge that worker/paged_attention.h describes, block by block. K and V may
// be stored in 16 bits: each row is widened to f32 as it is loaded, and all arithmetic is f32.
#include <cstdint>

#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr float kNegInf = -__builtin_inff();

// How a K/V element type loads as f32: kWidth elements at a time (LoadRow) or one (LoadOne).
struct F32 {
  using Elem = float;
  static V LoadRow(const float* p) { return Load(p); }
  static float LoadOne(const float* p) { return *p; }
};

// bf16 is the top half of an f32: zero-extend to 32 bits and shift left by 16.
struct Bf16 {
  using Elem = uint16_t;
#if defined(__AVX512F__)
  static V LoadRow(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#else
  static V LoadRow(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
  static float LoadOne(const uint16_t* p) {
    return __builtin_bit_cast(float, static_cast<uint32_t>(*p) << 16);
  }
};

// IEEE half: vcvtph2ps (F16C, in both x86-64-v3 and v4).
struct F16 {
  using Elem = uint16_t;
#if defined(__AVX512F__)
  static V LoadRow(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
#else
  static V LoadRow(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
#endif
  static float LoadOne(const uint16_t* p) { return _cvtsh_ss(*p); }
};

// scores[j] = q · k_j · scale for the first n keys of a block (k: (n, hd)); returns the max.
template <typename T>
float Scores(const float* q, const typename T::Elem* k, int n, int hd, float scale, float* scores) {
  float max = kNegInf;
  int j = 0;
  if (hd % kWidth == 0) {
    // Four keys at a time: four independent FMA chains, q loaded once for all four.
    for (; j + 4 <= n; j += 4) {
      const typename T::Elem* k0 = k + j * hd;
      V a0 = Zero(), a1 = a0, a2 = a0, a3 = a0;
      for (int d = 0; d < hd; d += kWidth) {
        const V qd = Load(q + d);
        a0 = Fma(qd, T::LoadRow(k0 + d), a0);
        a1 = Fma(qd, T::LoadRow(k0 + hd + d), a1);
        a2 = Fma(qd, T::LoadRow(k0 + 2 * hd + d), a2);
        a3 = Fma(qd, T::LoadRow(k0 + 3 * hd + d), a3);
      }
      _mm_storeu_ps(scores + j, _mm_mul_ps(Reduce4(a0, a1, a2, a3), _mm_set1_ps(scale)));
      max = MaxFloat(max, MaxFloat(MaxFloat(scores[j], scores[j + 1]),
                                   MaxFloat(scores[j + 2], scores[j + 3])));
    }
  }
  for (; j < n; ++j) {
    const typename T::Elem* kj = k + j * hd;
    float sum = 0.0f;
    for (int d = 0; d < hd; ++d) sum += q[d] * T::LoadOne(kj + d);
    scores[j] = sum * scale;
    max = MaxFloat(max, scores[j]);
  }
  return max;
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
template <typename T>
void AccumulateValues(const float* p, const typename T::Elem* v, int n, int hd, float correction,
                      float* o) {
  if (hd % kWidth != 0) {
    for (int d = 0; d < hd; ++d) o[d] *= correction;
    for (int j = 0; j < n; ++j) {
      for (int d = 0; d < hd; ++d) o[d] += p[j] * T::LoadOne(v + j * hd + d);
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
      const typename T::Elem* vj = v + j * hd + d;
      a0 = Fma(pj, T::LoadRow(vj), a0);
      a1 = Fma(pj, T::LoadRow(vj + kWidth), a1);
      a2 = Fma(pj, T::LoadRow(vj + 2 * kWidth), a2);
      a3 = Fma(pj, T::LoadRow(vj + 3 * kWidth), a3);
    }
    Store(o + d, a0);
    Store(o + d + kWidth, a1);
    Store(o + d + 2 * kWidth, a2);
    Store(o + d + 3 * kWidth, a3);
  }
  for (; d < hd; d += kWidth) {
    V acc = Mul(Load(o + d), c);
    for (int j = 0; j < n; ++j) acc = Fma(Set1(p[j]), T::LoadRow(v + j * hd + d), acc);
    Store(o + d, acc);
  }
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
  // scratch: m (states) | l (states) | acc (states, hd) | scores (bs)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  float* scores = acc + static_cast<long>(states) * hd;
  if (!t.resume) {
    for (int s = 0; s < states; ++s) m[s] = kNegInf;
    for (long i = 0; i < states + static_cast<long>(states) * hd; ++i) l[i] = 0.0f;
  }

  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  const int last_pos = t.start_pos + t.row_end - 1;
  const int num_blocks = t.block_end >= 0 ? t.block_end : last_pos / bs + 1;
  const long head_stride = static_cast<long>(bs) * hd;
  const long block_stride = t.num_kv_heads * head_stride;
  const long run_bytes = (t.head_end - t.head_begin) * head_stride * sizeof(Elem);
  for (int b = t.block_begin; b < num_blocks; ++b) {
    if (b + 1 < num_blocks) {
      // Blocks are scattered: fetch the next one's run while this one is computed.
      const long next = t.block_table[b + 1] * block_stride + t.head_begin * head_stride;
      const char* nk = reinterpret_cast<const char*>(k_pool + next);
      const char* nv = reinterpret_cast<const char*>(v_pool + next);
      for (long off = 0; off < run_bytes; off += 64) {
        _mm_prefetch(nk + off, _MM_HINT_T0);
        _mm_prefetch(nv + off, _MM_HINT_T0);
      }
    }
    const int base = b * bs;
    for (int h = t.head_begin; h < t.head_end; ++h) {
      const long at = t.block_table[b] * block_stride + h * head_stride;
      const Elem* kb = k_pool + at;  // (bs, hd)
      const Elem* vb = v_pool + at;  // (bs, hd)
      for (int r = t.row_begin; r < t.row_end; ++r) {
        const int n = MinInt(bs, t.start_pos + r - base + 1);  // causal limit in this block
        if (n <= 0) continue;
        const float* q_row = t.q + static_cast<long>(r) * t.q_stride;
        for (int g = 0; g < group; ++g) {
          const int qh = h * group + g;
          const int s = (r - t.row_begin) * heads + (qh - t.head_begin * group);
          const float block_max = Scores<T>(q_row + qh * hd, kb, n, hd, scale, scores);
          const float m_new = MaxFloat(m[s], block_max);
          const float correction = __builtin_expf(m[s] - m_new);  // 0 on the first block
          l[s] = l[s] * correction + ExpShifted(scores, n, m_new);
          AccumulateValues<T>(scores, vb, n, hd, correction, acc + static_cast<long>(s) * hd);
          m[s] = m_new;
        }
      }
    }
  }
  if (!t.finish) return;
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

}  // namespace

void Attention(const AttentionTile& t) {
  switch (t.kv_dtype) {
    case KvDtype::kF32:
      return AttentionOf<F32>(t);
    case KvDtype::kBf16:
      return AttentionOf<Bf16>(t);
    case KvDtype::kF16:
      return AttentionOf<F16>(t);
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
