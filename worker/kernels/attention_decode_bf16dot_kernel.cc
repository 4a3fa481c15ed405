// Paged attention for decodes and short steps multiplying bf16 pairs (AVX-512 table only;
// isa.cc runs it only where the CPU has AVX512_BF16), for a bf16 or int8 KV cache:
// attention_kernel.cc's job, with the keys of a block in the vector lanes for the scores
// and head_dim in them for P·V, so that no score needs a horizontal sum:
//
//   scores:  s[keys] += kᵀ[d, d+1][keys] · q[d, d+1]     (K transposed once per block and KV head)
//   P·V:     o[d] += v[j, j+1][d] · p[j, j+1]             (V paired along keys, as the prefill's)
//
// Each vdpbf16ps adds two products to each of 16 sums, and the K and V a block is turned into
// serve every row of the tile and every query head of its group. q and p are rounded to bf16; K
// and V are read as stored (bf16) or widened exactly (int8, whose row scales multiply the
// scores and p instead). Sums are f32. An f32 or f16 tile goes to `attention`, keeping its
// precision. A row's arithmetic depends only on its
// position and its blocks, never on what else shares the step, as `attention`'s does.
#include <cstdint>
#include <type_traits>

#include "worker/kernels/attention_states.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/kv_rows.h"
#include "worker/kernels/vec.h"

#if !defined(__AVX512F__)
#error "attention_decode_bf16dot_kernel.cc is built for the AVX-512 table only"
#endif
#pragma GCC target("avx512bf16")

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kLanes = 16;  // keys per pass, dwords per vector
constexpr float kNegInf = -__builtin_inff();

// The index vectors of a 16×16 dword transpose's stage S (8, 4, 2, 1): rows i and i + S (i
// without bit S) swap the lanes with bit S of the first for those without it of the second;
// first: lanes of row i after the stage, second: of row i + S.
struct TransposeIndex {
  int32_t first[kLanes], second[kLanes];
};

constexpr TransposeIndex IndexOf(int s) {
  TransposeIndex x{};
  for (int lane = 0; lane < kLanes; ++lane) {
    x.first[lane] = (lane & s) != 0 ? kLanes + lane - s : lane;
    x.second[lane] = (lane & s) != 0 ? kLanes + lane : lane + s;
  }
  return x;
}

constexpr TransposeIndex kStages[4] = {IndexOf(8), IndexOf(4), IndexOf(2), IndexOf(1)};

// r[i] lane L ↔ r[L] lane i: each stage swaps one bit of the row with the same bit of the lane.
[[gnu::always_inline]] inline void Transpose16(__m512i* r) {
#pragma GCC unroll 4
  for (int stage = 0; stage < 4; ++stage) {
    const int s = 8 >> stage;
    const __m512i first = _mm512_loadu_si512(kStages[stage].first);
    const __m512i second = _mm512_loadu_si512(kStages[stage].second);
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
      if ((i & s) != 0) continue;
      const __m512i a = r[i], b = r[i + s];
      r[i] = _mm512_permutex2var_epi32(a, first, b);
      r[i + s] = _mm512_permutex2var_epi32(a, second, b);
    }
  }
}

// Word w of the two halves of 32 words interleaved from a (even w) and b (odd w): the V pairs
// of two rows, by vpermt2w.
struct InterleaveIndex {
  int16_t lo[2 * kLanes], hi[2 * kLanes];
};

constexpr InterleaveIndex kInterleave = [] {
  InterleaveIndex x{};
  for (int w = 0; w < 2 * kLanes; ++w) {
    x.lo[w] = static_cast<int16_t>((w % 2) * 32 + w / 2);
    x.hi[w] = static_cast<int16_t>((w % 2) * 32 + kLanes + w / 2);
  }
  return x;
}();

// 32 elements of a row (fewer: `dims`, the rest 0) as 16 bf16 pairs: bf16 as stored, int8
// exactly (its scale is applied elsewhere).
template <typename T>
[[gnu::always_inline]] inline __m512i Pairs32(const typename T::Elem* row, int dims) {
  if constexpr (std::is_same_v<T, Bf16>) {
    const __mmask16 m = dims >= 32 ? 0xFFFF : static_cast<__mmask16>((1u << (dims / 2)) - 1);
    return _mm512_maskz_loadu_epi32(m, row);
  } else {
    const __mmask32 m = dims >= 32 ? 0xFFFFFFFFu : (1u << dims) - 1;
    const __m256i b = _mm256_maskz_loadu_epi8(m, row);
    const V lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(b)));
    const V hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(b, 1)));
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
  }
}

// 16 elements of a row (fewer: `dims`, the rest 0) as bf16 bits in the low half of each dword.
template <typename T>
[[gnu::always_inline]] inline __m512i Words16(const typename T::Elem* row, int dims) {
  const __mmask16 m = dims >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << dims) - 1);
  if constexpr (std::is_same_v<T, Bf16>) {
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row));
  } else {
    const V x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, row)));
    return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)));
  }
}

// A (block, KV head) run as the passes read it, in `kt` and `v2`:
//   kt: per pass of 16 keys, hd2p words × 16 lanes: word [t][j] = k_j[2t] | k_j[2t+1] << 16
//   v2: per pair of keys, hd words: word [jp][d] = v_2jp[d] | v_2jp+1[d] << 16
// (keys past `keys` are 0), and for int8 the rows' scales as f32 in k_scale, v_scale.
template <typename T>
void PrepareRun(const typename T::Elem* k_run, const typename T::Elem* v_run, int keys, int hd,
                int bs, int hd2p, uint32_t* kt, uint32_t* v2, float* k_scale, float* v_scale) {
  constexpr bool kBf16 = std::is_same_v<T, Bf16>;
  const bool whole = hd % (2 * kLanes) == 0;  // the models' head sizes: no masks
  __m512i r[kLanes];
  for (int j0 = 0; j0 < keys; j0 += kLanes) {
    const int n = MinInt(kLanes, keys - j0);
    uint32_t* pass = kt + static_cast<long>(j0 / kLanes) * hd2p * kLanes;
    for (int d0 = 0; d0 < hd; d0 += 2 * kLanes) {
      const typename T::Elem* k0 = k_run + static_cast<long>(j0) * hd + d0;
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) {
        if (i >= n) {
          r[i] = _mm512_setzero_si512();
        } else if (kBf16 && whole) {
          r[i] = _mm512_loadu_si512(k0 + static_cast<long>(i) * hd);
        } else {
          r[i] = Pairs32<T>(k0 + static_cast<long>(i) * hd, hd - d0);
        }
      }
      Transpose16(r);
#pragma GCC unroll 16
      for (int t = 0; t < kLanes; ++t) {
        _mm512_storeu_si512(pass + static_cast<long>(d0 / 2 + t) * kLanes, r[t]);
      }
    }
  }
  if (kBf16 && whole) {
    const __m512i lo = _mm512_loadu_si512(kInterleave.lo);
    const __m512i hi = _mm512_loadu_si512(kInterleave.hi);
    for (int j = 0; j < keys; j += 2) {
      const typename T::Elem* a = v_run + static_cast<long>(j) * hd;
      uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
      for (int d = 0; d < hd; d += 2 * kLanes) {
        const __m512i x = _mm512_loadu_si512(a + d);
        const __m512i y = j + 1 < keys ? _mm512_loadu_si512(a + hd + d) : _mm512_setzero_si512();
        _mm512_storeu_si512(out + d, _mm512_permutex2var_epi16(x, lo, y));
        _mm512_storeu_si512(out + d + kLanes, _mm512_permutex2var_epi16(x, hi, y));
      }
    }
  }
  for (int j = 0; j < keys && !(kBf16 && whole); j += 2) {
    const typename T::Elem* a = v_run + static_cast<long>(j) * hd;
    uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
    for (int d = 0; d < hd; d += kLanes) {
      const __m512i lo = Words16<T>(a + d, hd - d);
      const __m512i hi = j + 1 < keys ? Words16<T>(a + hd + d, hd - d) : _mm512_setzero_si512();
      const __mmask16 m = hd - d >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (hd - d)) - 1);
      _mm512_mask_storeu_epi32(out + d, m, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
  if constexpr (std::is_same_v<T, Int8>) {
    const auto* ks = reinterpret_cast<const uint16_t*>(k_run + static_cast<long>(bs) * hd);
    const auto* vs = reinterpret_cast<const uint16_t*>(v_run + static_cast<long>(bs) * hd);
    for (int j = 0; j < keys; ++j) {
      k_scale[j] = _cvtsh_ss(ks[j]);
      v_scale[j] = _cvtsh_ss(vs[j]);
    }
  }
}

// One state (a row and query head: its m, l and hd outputs) merged with the first n keys of a
// run, for any even head_dim: qp its q as bf16 pairs (hd/2 words).
template <typename T>
void MergeRun(const uint32_t* qp, const uint32_t* kt, const uint32_t* v2, const float* k_scale,
              const float* v_scale, int n, int hd, int hd2p, float scale, float* m, float* l,
              float* o) {
  for (int j0 = 0; j0 < n; j0 += kLanes) {
    const int keys = MinInt(kLanes, n - j0);
    const __mmask16 seen = keys >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << keys) - 1);
    const uint32_t* pass = kt + static_cast<long>(j0 / kLanes) * hd2p * kLanes;
    // Four chains over the pairs of head_dim.
    V a0 = Zero(), a1 = a0, a2 = a0, a3 = a0;
    int t = 0;
    for (; t + 4 <= hd / 2; t += 4) {
      const uint32_t* w = pass + static_cast<long>(t) * kLanes;
      a0 = _mm512_dpbf16_ps(a0, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w)),
                            reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[t])));
      a1 = _mm512_dpbf16_ps(a1, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + kLanes)),
                            reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[t + 1])));
      a2 = _mm512_dpbf16_ps(a2, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 2 * kLanes)),
                            reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[t + 2])));
      a3 = _mm512_dpbf16_ps(a3, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 3 * kLanes)),
                            reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[t + 3])));
    }
    for (; t < hd / 2; ++t) {
      a0 = _mm512_dpbf16_ps(
          a0, reinterpret_cast<__m512bh>(_mm512_loadu_si512(pass + static_cast<long>(t) * kLanes)),
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[t])));
    }
    V s = Mul(Add(Add(a0, a1), Add(a2, a3)), Set1(scale));
    if constexpr (std::is_same_v<T, Int8>) s = Mul(s, _mm512_maskz_loadu_ps(seen, k_scale + j0));
    s = _mm512_mask_mov_ps(Set1(kNegInf), seen, s);
    const float m_new = MaxFloat(*m, _mm512_reduce_max_ps(s));
    const float c = __builtin_expf(*m - m_new);  // 0 on the first keys
    V p = _mm512_maskz_mov_ps(seen, Exp(Sub(s, Set1(m_new))));
    *l = *l * c + ReduceAdd(p);
    *m = m_new;
    if constexpr (std::is_same_v<T, Int8>) p = Mul(p, _mm512_maskz_loadu_ps(seen, v_scale + j0));
    // p as bf16 pairs of keys: word jp = p_2jp | p_2jp+1 << 16.
    alignas(32) uint32_t pp[kLanes / 2];
    _mm256_store_si256(reinterpret_cast<__m256i*>(pp),
                       reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(p)));
    const int pairs = (keys + 1) / 2;
    const uint32_t* vp = v2 + static_cast<long>(j0 / 2) * hd;
    const V cv = Set1(c);
    int d = 0;
    for (; d + 4 * kLanes <= hd; d += 4 * kLanes) {
      V o0 = Mul(Load(o + d), cv), o1 = Mul(Load(o + d + kLanes), cv);
      V o2 = Mul(Load(o + d + 2 * kLanes), cv), o3 = Mul(Load(o + d + 3 * kLanes), cv);
      for (int jp = 0; jp < pairs; ++jp) {
        const __m512bh pj = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pp[jp]));
        const uint32_t* w = vp + static_cast<long>(jp) * hd + d;
        o0 = _mm512_dpbf16_ps(o0, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w)), pj);
        o1 = _mm512_dpbf16_ps(o1, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + kLanes)), pj);
        o2 = _mm512_dpbf16_ps(o2, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 2 * kLanes)),
                              pj);
        o3 = _mm512_dpbf16_ps(o3, reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 3 * kLanes)),
                              pj);
      }
      Store(o + d, o0);
      Store(o + d + kLanes, o1);
      Store(o + d + 2 * kLanes, o2);
      Store(o + d + 3 * kLanes, o3);
    }
    for (; d < hd; d += kLanes) {
      const __mmask16 md = hd - d >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (hd - d)) - 1);
      V acc = Mul(_mm512_maskz_loadu_ps(md, o + d), cv);
      for (int jp = 0; jp < pairs; ++jp) {
        acc = _mm512_dpbf16_ps(acc,
                               reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi32(
                                   md, vp + static_cast<long>(jp) * hd + d)),
                               reinterpret_cast<__m512bh>(_mm512_set1_epi32(pp[jp])));
      }
      _mm512_mask_storeu_ps(o + d, md, acc);
    }
  }
}

// G states (consecutive query heads of one row and KV head: their m, l and HD outputs each)
// merged with the first n keys of a run; qp their q as bf16 pairs (HD/2 words each). The heads
// go together so that each K and V word loaded serves G of them and the chains of sums are
// independent: 8 chains of scores (8/G per head), G·HD/16 of outputs.
template <typename T, int HD, int G>
[[gnu::always_inline]] inline void MergeHeads(const uint32_t* qp, const uint32_t* kt,
                                              const uint32_t* v2, const float* k_scale,
                                              const float* v_scale, int n, int hd2p, float scale,
                                              float* m, float* l, float* o) {
  constexpr int kChains = 8 / G, kPairs = HD / 2, kDv = HD / kLanes;
  for (int j0 = 0; j0 < n; j0 += kLanes) {
    const int keys = MinInt(kLanes, n - j0);
    const __mmask16 seen = keys >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << keys) - 1);
    const uint32_t* pass = kt + static_cast<long>(j0 / kLanes) * hd2p * kLanes;
    V a[G][kChains];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
      for (int c = 0; c < kChains; ++c) a[g][c] = Zero();
    }
    for (int t = 0; t < kPairs; t += kChains) {
#pragma GCC unroll 8
      for (int c = 0; c < kChains; ++c) {
        const __m512bh w = reinterpret_cast<__m512bh>(
            _mm512_loadu_si512(pass + static_cast<long>(t + c) * kLanes));
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          a[g][c] = _mm512_dpbf16_ps(
              a[g][c], w, reinterpret_cast<__m512bh>(_mm512_set1_epi32(qp[g * kPairs + t + c])));
        }
      }
    }
    alignas(64) float m_old[kLanes] = {}, m_new[kLanes] = {};
    V p[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      V sum = a[g][0];
#pragma GCC unroll 8
      for (int c = 1; c < kChains; ++c) sum = Add(sum, a[g][c]);
      V s = Mul(sum, Set1(scale));
      if constexpr (std::is_same_v<T, Int8>) s = Mul(s, _mm512_maskz_loadu_ps(seen, k_scale + j0));
      s = _mm512_mask_mov_ps(Set1(kNegInf), seen, s);
      m_old[g] = m[g];
      m_new[g] = MaxFloat(m[g], _mm512_reduce_max_ps(s));
      p[g] = _mm512_maskz_mov_ps(seen, Exp(Sub(s, Set1(m_new[g]))));
    }
    // The rescales of all G heads at once; ~0 where nothing was seen before (l and o are 0).
    alignas(64) float c[kLanes];
    Store(c, Exp(Sub(Load(m_old), Load(m_new))));
    alignas(32) uint32_t pp[G][kLanes / 2];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      l[g] = l[g] * c[g] + ReduceAdd(p[g]);
      m[g] = m_new[g];
      V pv = p[g];
      if constexpr (std::is_same_v<T, Int8>)
        pv = Mul(pv, _mm512_maskz_loadu_ps(seen, v_scale + j0));
      // p as bf16 pairs of keys: word jp = p_2jp | p_2jp+1 << 16.
      _mm256_store_si256(reinterpret_cast<__m256i*>(pp[g]),
                         reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(pv)));
    }
    V acc[G][kDv];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const V cg = Set1(c[g]);
#pragma GCC unroll 8
      for (int dv = 0; dv < kDv; ++dv) acc[g][dv] = Mul(Load(o + g * HD + dv * kLanes), cg);
    }
    const int pairs = (keys + 1) / 2;
    const uint32_t* vp = v2 + static_cast<long>(j0 / 2) * HD;
    for (int jp = 0; jp < pairs; ++jp) {
      __m512bh pj[G];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) pj[g] = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pp[g][jp]));
#pragma GCC unroll 8
      for (int dv = 0; dv < kDv; ++dv) {
        const __m512bh w = reinterpret_cast<__m512bh>(
            _mm512_loadu_si512(vp + static_cast<long>(jp) * HD + dv * kLanes));
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) acc[g][dv] = _mm512_dpbf16_ps(acc[g][dv], w, pj[g]);
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
      for (int dv = 0; dv < kDv; ++dv) Store(o + g * HD + dv * kLanes, acc[g][dv]);
    }
  }
}

// One row's `group` query heads of KV head h merged with the first n keys of a run: the models'
// head sizes G at a time (G·HD ≤ 256, so the outputs' sums stay in registers), then one at a
// time; other head sizes one at a time through MergeRun.
template <typename T, int HD, int G>
void MergeInPasses(const uint32_t* qp, const uint32_t* kt, const uint32_t* v2, const float* k_scale,
                   const float* v_scale, int n, int hd2p, int group, float scale, float* m,
                   float* l, float* o) {
  int g = 0;
  for (; g + G <= group; g += G) {
    MergeHeads<T, HD, G>(qp + g * HD / 2, kt, v2, k_scale, v_scale, n, hd2p, scale, m + g, l + g,
                         o + static_cast<long>(g) * HD);
  }
  for (; g < group; ++g) {
    MergeHeads<T, HD, 1>(qp + g * HD / 2, kt, v2, k_scale, v_scale, n, hd2p, scale, m + g, l + g,
                         o + static_cast<long>(g) * HD);
  }
}

template <typename T>
void MergeGroup(const uint32_t* qp, const uint32_t* kt, const uint32_t* v2, const float* k_scale,
                const float* v_scale, int n, int hd, int hd2p, int group, float scale, float* m,
                float* l, float* o) {
  if (hd == 64) {
    return MergeInPasses<T, 64, 4>(qp, kt, v2, k_scale, v_scale, n, hd2p, group, scale, m, l, o);
  }
  if (hd == 128) {
    return MergeInPasses<T, 128, 2>(qp, kt, v2, k_scale, v_scale, n, hd2p, group, scale, m, l, o);
  }
  for (int g = 0; g < group; ++g) {
    MergeRun<T>(qp + g * hd / 2, kt, v2, k_scale, v_scale, n, hd, hd2p, scale, m + g, l + g,
                o + static_cast<long>(g) * hd);
  }
}

template <typename T>
void DecodeOf(const AttentionTile& t) {
  using Elem = typename T::Elem;
  const Elem* k_pool = static_cast<const Elem*>(t.k_pool);
  const Elem* v_pool = static_cast<const Elem*>(t.v_pool);
  const int hd = t.head_dim, bs = t.block_size, hd2 = hd / 2;
  const int hd2p = (hd2 + kLanes - 1) / kLanes * kLanes;
  const int group = t.num_heads / t.num_kv_heads;
  const int rows = t.row_end - t.row_begin;
  const int heads = (t.head_end - t.head_begin) * group;  // query heads of this tile
  const int states = rows * heads;
  // scratch (AttentionScratchFloats): m | l | acc (states; AttentionTile's layout) | q as bf16
  // pairs (states, hd/2 words) | kt (passes, hd2p, 16 words) | v2 (bs/2 + 1, hd words) |
  // k_scale, v_scale (bs + 16 each)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  auto* qp = reinterpret_cast<uint32_t*>(acc + static_cast<long>(states) * hd);
  uint32_t* kt = qp + static_cast<long>(states) * hd2;
  const int passes = (bs + kLanes - 1) / kLanes;
  uint32_t* v2 = kt + static_cast<long>(passes) * hd2p * kLanes;
  float* k_scale = reinterpret_cast<float*>(v2 + static_cast<long>(bs / 2 + 1) * hd);
  float* v_scale = k_scale + bs + kLanes;
  StartStates(t, states, m);
  for (int s = 0; s < states; ++s) {
    const int r = t.row_begin + s / heads, i = s % heads;
    const float* q =
        t.q + static_cast<long>(r) * t.q_stride + static_cast<long>(t.head_begin * group + i) * hd;
    uint32_t* out = qp + static_cast<long>(s) * hd2;
    for (int d = 0; d < hd; d += kLanes) {
      const __mmask16 md = hd - d >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (hd - d)) - 1);
      const __m256i words =
          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(md, q + d)));
      _mm256_mask_storeu_epi32(
          out + d / 2, static_cast<__mmask8>((1u << ((MinInt(16, hd - d) + 1) / 2)) - 1), words);
    }
  }

  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  ForEachRun<T, /*kPerHead=*/true>(t, [&](int base, int keys, int h, long at) {
    PrepareRun<T>(k_pool + at, v_pool + at, keys, hd, bs, hd2p, kt, v2, k_scale, v_scale);
    for (int r = t.row_begin; r < t.row_end; ++r) {
      const int n = MinInt(keys, t.start_pos + r - base + 1);  // causal limit in this block
      if (n <= 0) continue;
      const int s = (r - t.row_begin) * heads + (h - t.head_begin) * group;
      MergeGroup<T>(qp + static_cast<long>(s) * hd2, kt, v2, k_scale, v_scale, n, hd, hd2p, group,
                    scale, &m[s], &l[s], acc + static_cast<long>(s) * hd);
    }
  });
  FinishStates(t, heads, l, acc);
}

}  // namespace

void Attention(const AttentionTile& t);  // attention_kernel.cc

void AttentionDecodeBf16Dot(const AttentionTile& t) {
  switch (t.kv_dtype) {
    case KvDtype::kBf16:
      return DecodeOf<Bf16>(t);
    case KvDtype::kInt8:
      return DecodeOf<Int8>(t);
    case KvDtype::kF32:
    case KvDtype::kF16:
      break;  // f32 and f16 K/V keep their precision (kernels.h)
  }
  Attention(t);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
