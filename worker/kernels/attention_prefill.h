// The prefill attention kernel's tile loop, for kernel sources compiled once per ISA (the rules
// of vec.h): a tile of a long prefill chunk with its query rows in vector lanes, through the
// online-softmax merge of worker/paged_attention.h, block by block.
//
// A tile has up to 16 rows, and every row meets every key of a block with every query head of
// its group. With rows in lanes, a key's score for kWidth rows is one chain of multiply-adds
// over head_dim (K's element broadcast, the rows' q transposed), so no score needs a horizontal
// sum; the block's max, its exps and the rescale are one vector op for kWidth rows; and P·V is
// an outer product: each V element broadcast once for kWidth rows. The rows' q are transposed
// once per tile and the outputs back once at its end, which a prefill's blocks amortise.
//
// The arithmetic is a policy, `Math`, with:
//   QWords(hd)                      floats of one unit's transposed q (a unit: one query head's
//                                   kWidth rows), which Math::StoreQ fills lane by lane;
//   Block<T>(...)                   a (block, KV head) run's K and V as Math::Merge reads them;
//   Merge<HD>(...)                  one unit against a block's first n keys.
// attention_prefill_kernel.cc's is f32; attention_prefill_bf16dot_kernel.cc's multiplies bf16
// pairs (AVX512_BF16). Everything here has internal linkage, so each source has its own copy,
// built for its own instructions.
#ifndef PAGODA_WORKER_KERNELS_ATTENTION_PREFILL_H_
#define PAGODA_WORKER_KERNELS_ATTENTION_PREFILL_H_

#include <cstdint>

#include "worker/kernels/kernels.h"
#include "worker/kernels/kv_rows.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr float kNegInf = -__builtin_inff();

// s with its lanes [0, first) set to `fill`: rows that do not see the key.
[[gnu::always_inline]] inline V FillLanesBelow(V s, int first, float fill) {
#if defined(__AVX512F__)
  const __mmask16 below = first >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << first) - 1);
  return _mm512_mask_mov_ps(s, below, Set1(fill));
#else
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 below = _mm256_cmp_ps(lane, Set1(static_cast<float>(first)), _CMP_LT_OQ);
  return _mm256_blendv_ps(s, Set1(fill), below);
#endif
}

// m with its −∞ lanes (rows that have seen no key yet) as 0, so that e^(s − m) stays finite.
[[gnu::always_inline]] inline V FiniteOrZero(V m) {
#if defined(__AVX512F__)
  return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(m, Set1(kNegInf), _CMP_EQ_OQ), Zero());
#else
  return _mm256_blendv_ps(m, Zero(), _mm256_cmp_ps(m, Set1(kNegInf), _CMP_EQ_OQ));
#endif
}

// The merge of a block's scores s[0..n) (lanes: rows; key j hidden from lanes [0, hide + j))
// into ml (m, then l): s becomes p = e^(s − m'), 0 where hidden. Returns the rescale e^(m − m').
[[gnu::always_inline]] inline V Softmax(float* s, int n, int hide, float* ml) {
  const int first_hidden_key = hide > 0 ? 0 : -hide + 1;  // keys [0, it) are seen by all lanes
  for (int j = first_hidden_key; j < n; ++j) {
    Store(s + j * kWidth, FillLanesBelow(Load(s + j * kWidth), hide + j, kNegInf));
  }
  const V m_old = Load(ml);
  V m_new = m_old;
  for (int j = 0; j < n; ++j) m_new = Max(m_new, Load(s + j * kWidth));
  const V shift = FiniteOrZero(m_new);
  const V c = Exp(Sub(m_old, shift));  // ~0 where nothing was seen yet: l and ot are 0 there
  V l = Mul(Load(ml + kWidth), c);
  for (int j = 0; j < n; ++j) {
    V p = Exp(Sub(Load(s + j * kWidth), shift));
    if (j >= first_hidden_key) p = FillLanesBelow(p, hide + j, 0.0f);
    l = Add(l, p);
    Store(s + j * kWidth, p);
  }
  Store(ml, m_new);
  Store(ml + kWidth, l);
  return c;
}

template <typename Math, typename T>
void PrefillOf(const AttentionTile& t) {
  using Elem = typename T::Elem;
  const Elem* k_pool = static_cast<const Elem*>(t.k_pool);
  const Elem* v_pool = static_cast<const Elem*>(t.v_pool);
  const int hd = t.head_dim, bs = t.block_size;
  const int group = t.num_heads / t.num_kv_heads;
  const int rows = t.row_end - t.row_begin;
  const int heads = (t.head_end - t.head_begin) * group;  // query heads of this tile
  const int states = rows * heads;
  const int chunks = (rows + kWidth - 1) / kWidth;  // of kWidth rows
  const int units = chunks * heads;                 // unit u = chunk · heads + query head offset
  // scratch (AttentionScratchFloats): m | l | acc (states; AttentionTile's layout, for resume
  // and !finish) | q (units, hd, kWidth) | ot (units, hd, kWidth) | ml (units, 2, kWidth) |
  // s (bs, kWidth) | K, V as Math::Block leaves them (bs, hd + 16 each)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  float* qt = acc + static_cast<long>(states) * hd;
  float* ot = qt + static_cast<long>(units) * hd * kWidth;
  float* ml = ot + static_cast<long>(units) * hd * kWidth;
  float* s = ml + static_cast<long>(units) * 2 * kWidth;
  float* k_wide = s + static_cast<long>(bs) * kWidth;
  float* v_wide = k_wide + static_cast<long>(bs) * (hd + 16);

  // The rows' q per unit, and their states (padding lanes: q 0, never written out).
  for (int u = 0; u < units; ++u) {
    const int chunk = u / heads, i = u % heads;
    float* o_u = ot + static_cast<long>(u) * hd * kWidth;
    float* ml_u = ml + static_cast<long>(u) * 2 * kWidth;
    for (int lane = 0; lane < kWidth; ++lane) {
      const int r = chunk * kWidth + lane;  // row of the tile
      const int state = r * heads + i;
      const bool real = r < rows;
      const float* q_row = real ? t.q + static_cast<long>(t.row_begin + r) * t.q_stride +
                                      static_cast<long>(t.head_begin * group + i) * hd
                                : nullptr;
      Math::StoreQ(q_row, hd, lane, qt + static_cast<long>(u) * Math::QWords(hd));
      for (int d = 0; d < hd; ++d) {
        o_u[d * kWidth + lane] = real && t.resume ? acc[static_cast<long>(state) * hd + d] : 0.0f;
      }
      ml_u[lane] = real && t.resume ? m[state] : kNegInf;
      ml_u[kWidth + lane] = real && t.resume ? l[state] : 0.0f;
    }
  }

  const V scale = Set1(1.0f / __builtin_sqrtf(static_cast<float>(hd)));
  // The models' head sizes, compiled for; others (tests' 8, 20, 24) at run time.
  auto* merge = hd == 64    ? &Math::template Merge<64>
                : hd == 128 ? &Math::template Merge<128>
                            : &Math::template Merge<0>;
  ForEachRun<T>(t, [&](int base, int keys, int h, long at) {
    const void* kb;
    const void* vb;
    Math::template Block<T>(k_pool, v_pool, at, keys, hd, bs, k_wide, v_wide, &kb, &vb);
    for (int chunk = 0; chunk < chunks; ++chunk) {
      // Lane x is the row at position pos0 + x; it sees key j when base + j <= pos0 + x.
      const int pos0 = t.start_pos + t.row_begin + chunk * kWidth;
      const int last_lane = MinInt(kWidth, rows - chunk * kWidth) - 1;
      const int n = MinInt(keys, pos0 + last_lane - base + 1);
      if (n <= 0) continue;
      const int hide = base - pos0;  // key j hidden from lanes [0, hide + j)
      for (int g = 0; g < group; ++g) {
        const long u = static_cast<long>(chunk) * heads + (h - t.head_begin) * group + g;
        merge(qt + u * Math::QWords(hd), kb, vb, n, hd, hide, scale, s, ml + u * 2 * kWidth,
              ot + u * hd * kWidth);
      }
    }
  });

  const int out_stride = t.num_heads * hd;
  for (int u = 0; u < units; ++u) {
    const int chunk = u / heads, i = u % heads;
    const float* o_u = ot + static_cast<long>(u) * hd * kWidth;
    const float* ml_u = ml + static_cast<long>(u) * 2 * kWidth;
    for (int lane = 0; lane < kWidth && chunk * kWidth + lane < rows; ++lane) {
      const int r = chunk * kWidth + lane;
      const int state = r * heads + i;
      if (t.finish) {
        const float inv = 1.0f / ml_u[kWidth + lane];
        float* dst = t.out + static_cast<long>(t.row_begin + r) * out_stride +
                     static_cast<long>(t.head_begin * group + i) * hd;
        for (int d = 0; d < hd; ++d) dst[d] = o_u[d * kWidth + lane] * inv;
      } else {
        m[state] = ml_u[lane];
        l[state] = ml_u[kWidth + lane];
        for (int d = 0; d < hd; ++d)
          acc[static_cast<long>(state) * hd + d] = o_u[d * kWidth + lane];
      }
    }
  }
}

// The tile through Math, whatever the pool's element type.
template <typename Math>
void PrefillTile(const AttentionTile& t) {
  switch (t.kv_dtype) {
    case KvDtype::kF32:
      return PrefillOf<Math, F32>(t);
    case KvDtype::kBf16:
      return PrefillOf<Math, Bf16>(t);
    case KvDtype::kF16:
      return PrefillOf<Math, F16>(t);
    case KvDtype::kInt8:
      return PrefillOf<Math, Int8>(t);
  }
}

}  // namespace
}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_ATTENTION_PREFILL_H_
