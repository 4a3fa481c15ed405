// Paged attention for decodes and short steps over an int8 KV cache, multiplying 16-bit integer
// pairs (vpmaddwd: AVX2 table only; isa.cc lends it to the AVX-512 table where the CPU lacks
// AVX512_BF16). attention_decode_bf16dot's layout, with integers for bf16:
//
//   scores:  s[keys] += kᵀ[d, d+1][keys] · q[d, d+1]     (K widened to int16 pairs, transposed
//                                                          once per block and KV head)
//   P·V:     o[d] += v[j, j+1][d] · p[j, j+1]             (V paired along keys)
//
// q is rounded to int16 with a scale per state (a row and query head), and p times V's row
// scales to int16 with a scale per state and 16 keys: each to ~1/65,000 of its largest value
// (on stories260K a twentieth of the KL the cache's own 8 bits cost). The products and their
// sums are exact in int32 (|q·k| sums stay below 2^31 for head_dim ≤ 256, p·v's over 16 keys);
// the rows' scales, the softmax and the outputs are f32. Each vpmaddwd makes 16 products where
// an f32 FMA makes 8, and with its add takes about an FMA's time (Zen 3, docs/BENCHMARKS.md
// §43). A row's arithmetic depends only on its position and its blocks, never on what else
// shares the step.
#include <cstdint>

#include "worker/kernels/attention_states.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/kv_rows.h"
#include "worker/kernels/vec.h"

#if defined(__AVX512F__)
#error "attention_decode_int8_kernel.cc is built for the AVX2 table only"
#endif

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kLanes = 8;  // keys per pass of the scores, dwords per vector
constexpr int kKeys = 16;  // keys per softmax update: two passes
constexpr float kNegInf = -__builtin_inff();
constexpr float kInt16Max = 32767.0f;

[[gnu::always_inline]] inline __m256i LoadI(const uint32_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
[[gnu::always_inline]] inline void StoreI(uint32_t* p, __m256i x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
}
// a + the sums of adjacent int16 products of w and x.
[[gnu::always_inline]] inline __m256i Madd(__m256i a, __m256i w, __m256i x) {
  return _mm256_add_epi32(a, _mm256_madd_epi16(w, x));
}

// Keeps x in a register: GCC would otherwise fold each use of a loaded vector into a memory
// operand of its own, reloading it once per head, and bound these loops by loads.
[[gnu::always_inline]] inline void InRegister(__m256i& x) { __asm__("" : "+x"(x)); }

[[gnu::always_inline]] inline float ReduceMax(V v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// r[i] lane L ↔ r[L] lane i, for 8 vectors of 8 dwords.
[[gnu::always_inline]] inline void Transpose8(__m256i* r) {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// The int16 pair (a, b) as vpmaddwd reads it: a in the low half. REQUIRES: |a|, |b| < 2^15.
inline uint32_t PairOf16(long a, long b) {
  return static_cast<uint16_t>(a) | static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16;
}
inline uint32_t PairOf(int8_t a, int8_t b) { return PairOf16(a, b); }

// A (block, KV head) run of `keys` rows (bs rows, then bs f16 scales) as the passes read it:
//   kt: per pass of 8 keys, hd/2 words × 8 lanes: word [t][j] = k_j[2t] | k_j[2t+1] << 16
//   v2: per pair of keys, hd words: word [jp][d] = v_2jp[d] | v_2jp+1[d] << 16
// as int16, keys past `keys` 0 up to a multiple of 16; k_scale = K's row scales times `scale`,
// v_scale = V's, 0 past `keys`.
void PrepareRun(const int8_t* k_run, const int8_t* v_run, int keys, int hd, int bs, float scale,
                uint32_t* kt, uint32_t* v2, float* k_scale, float* v_scale) {
  const int hd2 = hd / 2;
  const int padded = (keys + kKeys - 1) / kKeys * kKeys;
  if (hd % 16 == 0) {
    __m256i r[kLanes];
    for (int j0 = 0; j0 < padded; j0 += kLanes) {
      uint32_t* pass = kt + static_cast<long>(j0 / kLanes) * hd2 * kLanes;
      for (int d0 = 0; d0 < hd; d0 += 16) {
#pragma GCC unroll 8
        for (int i = 0; i < kLanes; ++i) {
          r[i] = j0 + i < keys
                     ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                           k_run + static_cast<long>(j0 + i) * hd + d0)))
                     : _mm256_setzero_si256();
        }
        Transpose8(r);
#pragma GCC unroll 8
        for (int t = 0; t < kLanes; ++t)
          StoreI(pass + static_cast<long>(d0 / 2 + t) * kLanes, r[t]);
      }
    }
    for (int j = 0; j < padded; j += 2) {
      const int8_t* a = v_run + static_cast<long>(j) * hd;
      uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
      for (int d = 0; d < hd; d += 16) {
        const __m128i x = j < keys ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + d))
                                   : _mm_setzero_si128();
        const __m128i y = j + 1 < keys
                              ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + hd + d))
                              : _mm_setzero_si128();
        StoreI(out + d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, y)));
        StoreI(out + d + 8, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x, y)));
      }
    }
  } else {
    for (int j = 0; j < padded; ++j) {
      const int8_t* k = k_run + static_cast<long>(j) * hd;
      uint32_t* pass = kt + static_cast<long>(j / kLanes) * hd2 * kLanes + j % kLanes;
      for (int t = 0; t < hd2; ++t)
        pass[t * kLanes] = j < keys ? PairOf(k[2 * t], k[2 * t + 1]) : 0;
    }
    for (int j = 0; j < padded; j += 2) {
      const int8_t* a = v_run + static_cast<long>(j) * hd;
      uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
      for (int d = 0; d < hd; ++d) {
        out[d] = PairOf(j < keys ? a[d] : 0, j + 1 < keys ? a[hd + d] : 0);
      }
    }
  }
  const auto* ks = reinterpret_cast<const uint16_t*>(k_run + static_cast<long>(bs) * hd);
  const auto* vs = reinterpret_cast<const uint16_t*>(v_run + static_cast<long>(bs) * hd);
  for (int j = 0; j < padded; ++j) {
    k_scale[j] = j < keys ? _cvtsh_ss(ks[j]) * scale : 0.0f;
    v_scale[j] = j < keys ? _cvtsh_ss(vs[j]) : 0.0f;
  }
}

// o[d] = o[d]·c + acc[d]·ps for one vector of 8 outputs.
[[gnu::always_inline]] inline void Update(float* o, __m256i acc, float c, float ps) {
  Store(o, Fma(_mm256_cvtepi32_ps(acc), Set1(ps), Mul(Load(o), Set1(c))));
}

// G states (consecutive query heads of one row and KV head: their m, l and hd outputs each)
// merged with the first n keys of a prepared run; qw their q as int16 pairs (hd/2 words each)
// and qs its scales. The heads go together so that each K word loaded serves G of them (and each
// V word two), with 2·G independent chains of scores.
template <int G>
[[gnu::noinline]] void MergeHeads(const uint32_t* qw, const float* qs, const uint32_t* kt,
                                  const uint32_t* v2, const float* k_scale, const float* v_scale,
                                  int n, int hd, float* m, float* l, float* o) {
  const int hd2 = hd / 2;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int j0 = 0; j0 < n; j0 += kKeys) {
    const int keys = MinInt(kKeys, n - j0);
    const uint32_t* pass0 = kt + static_cast<long>(j0 / kLanes) * hd2 * kLanes;
    const uint32_t* pass1 = pass0 + static_cast<long>(hd2) * kLanes;
    __m256i a[G][2];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) a[g][0] = a[g][1] = _mm256_setzero_si256();
    const uint32_t* q[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) q[g] = qw + g * hd2;
#pragma GCC unroll 2
    for (int t = 0; t < hd2; ++t) {
      __m256i w0 = LoadI(pass0 + t * kLanes), w1 = LoadI(pass1 + t * kLanes);
      InRegister(w0);
      InRegister(w1);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const __m256i x = _mm256_set1_epi32(static_cast<int>(q[g][t]));
        a[g][0] = Madd(a[g][0], w0, x);
        a[g][1] = Madd(a[g][1], w1, x);
      }
    }
    const V seen0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(keys), lane));
    const V seen1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(keys - kLanes), lane));
    const V ks0 = Load(k_scale + j0), ks1 = Load(k_scale + j0 + kLanes);
    const V vs0 = Load(v_scale + j0), vs1 = Load(v_scale + j0 + kLanes);
    alignas(32) float m_old[kLanes] = {}, m_new[kLanes] = {};
    V s[G][2];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const V q_scale = Set1(qs[g]);
      s[g][0] = _mm256_blendv_ps(Set1(kNegInf), Mul(Mul(_mm256_cvtepi32_ps(a[g][0]), ks0), q_scale),
                                 seen0);
      s[g][1] = _mm256_blendv_ps(Set1(kNegInf), Mul(Mul(_mm256_cvtepi32_ps(a[g][1]), ks1), q_scale),
                                 seen1);
      m_old[g] = m[g];
      m_new[g] = MaxFloat(m[g], ReduceMax(Max(s[g][0], s[g][1])));
    }
    // The rescales of all G heads at once; ~0 where nothing was seen before (l and o are 0).
    alignas(32) float c[kLanes];
    Store(c, Exp(Sub(Load(m_old), Load(m_new))));
    // p times V's scales as int16 pairs of keys: word jp = p_2jp | p_2jp+1 << 16.
    alignas(32) uint32_t pp[G][kLanes];
    float ps[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const V shift = Set1(m_new[g]);
      V p0 = _mm256_and_ps(Exp(Sub(s[g][0], shift)), seen0);
      V p1 = _mm256_and_ps(Exp(Sub(s[g][1], shift)), seen1);
      l[g] = l[g] * c[g] + ReduceAdd(Add(p0, p1));
      m[g] = m_new[g];
      p0 = Mul(p0, vs0);
      p1 = Mul(p1, vs1);
      const float p_max = ReduceMax(Max(p0, p1));
      const V to_int = Set1(p_max > 0.0f ? kInt16Max / p_max : 0.0f);
      ps[g] = p_max / kInt16Max;
      const __m256i words = _mm256_packs_epi32(_mm256_cvtps_epi32(Mul(p0, to_int)),
                                               _mm256_cvtps_epi32(Mul(p1, to_int)));
      StoreI(pp[g], _mm256_permute4x64_epi64(words, 0xD8));  // keys 0-15 in order
    }
    const int pairs = (keys + 1) / 2;
    const uint32_t* vp = v2 + static_cast<long>(j0 / 2) * hd;
    if (hd % 32 == 0) {
      // Two heads and 32 outputs at a time: 8 chains, each V word loaded once for both.
      constexpr int kH = G >= 2 ? 2 : 1;
      for (int d0 = 0; d0 < hd; d0 += 4 * kLanes) {
#pragma GCC unroll 2
        for (int g = 0; g < G; g += kH) {
          __m256i acc[kH][4];
#pragma GCC unroll 2
          for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 4
            for (int dv = 0; dv < 4; ++dv) acc[h][dv] = _mm256_setzero_si256();
          }
#pragma GCC unroll 1
          for (int jp = 0; jp < pairs; ++jp) {
            __m256i x[kH];
#pragma GCC unroll 2
            for (int h = 0; h < kH; ++h) x[h] = _mm256_set1_epi32(static_cast<int>(pp[g + h][jp]));
            const uint32_t* w = vp + static_cast<long>(jp) * hd + d0;
#pragma GCC unroll 4
            for (int dv = 0; dv < 4; ++dv) {
              __m256i wv = LoadI(w + dv * kLanes);
              InRegister(wv);
#pragma GCC unroll 2
              for (int h = 0; h < kH; ++h) acc[h][dv] = Madd(acc[h][dv], wv, x[h]);
            }
          }
#pragma GCC unroll 2
          for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 4
            for (int dv = 0; dv < 4; ++dv) {
              Update(o + static_cast<long>(g + h) * hd + d0 + dv * kLanes, acc[h][dv], c[g + h],
                     ps[g + h]);
            }
          }
        }
      }
    } else {
      // Other head sizes: one head and one vector at a time, the last one masked.
      for (int g = 0; g < G; ++g) {
        for (int d = 0; d < hd; d += kLanes) {
          const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(hd - d), lane);
          __m256i acc = _mm256_setzero_si256();
          for (int jp = 0; jp < pairs; ++jp) {
            const __m256i wv = _mm256_maskload_epi32(
                reinterpret_cast<const int*>(vp + static_cast<long>(jp) * hd + d), mask);
            acc = Madd(acc, wv, _mm256_set1_epi32(static_cast<int>(pp[g][jp])));
          }
          float* out = o + static_cast<long>(g) * hd + d;
          const V old = _mm256_maskload_ps(out, mask);
          _mm256_maskstore_ps(out, mask,
                              Fma(_mm256_cvtepi32_ps(acc), Set1(ps[g]), Mul(old, Set1(c[g]))));
        }
      }
    }
  }
}

void DecodeOfInt8(const AttentionTile& t) {
  const auto* k_pool = static_cast<const int8_t*>(t.k_pool);
  const auto* v_pool = static_cast<const int8_t*>(t.v_pool);
  const int hd = t.head_dim, bs = t.block_size, hd2 = hd / 2;
  const int group = t.num_heads / t.num_kv_heads;
  const int rows = t.row_end - t.row_begin;
  const int heads = (t.head_end - t.head_begin) * group;  // query heads of this tile
  const int states = rows * heads;
  const int padded = (bs + kKeys - 1) / kKeys * kKeys;
  // scratch (AttentionScratchFloats): m | l | acc (states; AttentionTile's layout) | q as int16
  // pairs (states, hd/2 words) | q's scales (states) | kt (padded / 8 passes, hd/2, 8 words) |
  // v2 (padded / 2, hd words) | k_scale, v_scale (padded each)
  float* m = t.scratch;
  float* l = m + states;
  float* acc = l + states;
  auto* qw = reinterpret_cast<uint32_t*>(acc + static_cast<long>(states) * hd);
  float* qs = reinterpret_cast<float*>(qw + static_cast<long>(states) * hd2);
  auto* kt = reinterpret_cast<uint32_t*>(qs + states);
  uint32_t* v2 = kt + static_cast<long>(padded) * hd2;
  float* k_scale = reinterpret_cast<float*>(v2 + static_cast<long>(padded / 2) * hd);
  float* v_scale = k_scale + padded;
  StartStates(t, states, m);
  for (int s = 0; s < states; ++s) {
    const int r = t.row_begin + s / heads, i = s % heads;
    const float* q =
        t.q + static_cast<long>(r) * t.q_stride + static_cast<long>(t.head_begin * group + i) * hd;
    float q_max = 0.0f;
    for (int d = 0; d < hd; ++d) q_max = MaxFloat(q_max, __builtin_fabsf(q[d]));
    const float to_int = q_max > 0.0f ? kInt16Max / q_max : 0.0f;
    qs[s] = q_max / kInt16Max;
    uint32_t* words = qw + static_cast<long>(s) * hd2;
    for (int d = 0; d < hd2; ++d) {
      words[d] =
          PairOf16(__builtin_lrintf(q[2 * d] * to_int), __builtin_lrintf(q[2 * d + 1] * to_int));
    }
  }

  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  ForEachRun<Int8, /*kPerHead=*/true>(t, [&](int base, int keys, int h, long at) {
    PrepareRun(k_pool + at, v_pool + at, keys, hd, bs, scale, kt, v2, k_scale, v_scale);
    for (int r = t.row_begin; r < t.row_end; ++r) {
      const int n = MinInt(keys, t.start_pos + r - base + 1);  // causal limit in this block
      if (n <= 0) continue;
      const int s0 = (r - t.row_begin) * heads + (h - t.head_begin) * group;
      int g = 0;
      for (; g + 4 <= group; g += 4) {
        const int s = s0 + g;
        MergeHeads<4>(qw + static_cast<long>(s) * hd2, qs + s, kt, v2, k_scale, v_scale, n, hd,
                      m + s, l + s, acc + static_cast<long>(s) * hd);
      }
      for (; g + 2 <= group; g += 2) {
        const int s = s0 + g;
        MergeHeads<2>(qw + static_cast<long>(s) * hd2, qs + s, kt, v2, k_scale, v_scale, n, hd,
                      m + s, l + s, acc + static_cast<long>(s) * hd);
      }
      for (; g < group; ++g) {
        const int s = s0 + g;
        MergeHeads<1>(qw + static_cast<long>(s) * hd2, qs + s, kt, v2, k_scale, v_scale, n, hd,
                      m + s, l + s, acc + static_cast<long>(s) * hd);
      }
    }
  });
  FinishStates(t, heads, l, acc);
}

}  // namespace

void Attention(const AttentionTile& t);  // attention_kernel.cc

void AttentionDecodeInt8(const AttentionTile& t) {
  if (t.kv_dtype != KvDtype::kInt8 || t.head_dim % 2 != 0 || t.head_dim > 256) return Attention(t);
  DecodeOfInt8(t);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
