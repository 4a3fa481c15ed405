// The prefill attention kernel multiplying bf16 pairs (AVX-512 table only; isa.cc runs it only
// where the CPU has AVX512_BF16), for a KV cache stored in fewer than 32 bits. The tile loop is
// attention_prefill.h's; here each vdpbf16ps adds two products to each of 16 rows' sums:
//
//   scores:  s_j[rows] += q[rows][d, d+1] · k_j[d, d+1]         (q as bf16 pairs per tile)
//   P·V:     o_d[rows] += p[rows][j, j+1] · v[j, j+1][d]        (p and V paired along keys)
//
// so a block takes half the instructions of the f32 kernel's FMAs. q and p are rounded to bf16
// (K and V are already 16-bit or int8 in such a cache: bf16 K and V are read as stored); the
// products are exact in f32 and summed in f32. docs/BENCHMARKS.md §38 measures what it costs in
// accuracy against the f32 kernel.
#include <cstdint>

#include "worker/kernels/attention_prefill.h"

#if !defined(__AVX512F__)
#error "attention_prefill_bf16dot_kernel.cc is built for the AVX-512 table only"
#endif
#pragma GCC target("avx512bf16")

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kKeysPerPass = 16;
constexpr int kDimsPerPass = 16;

// x rounded to the nearest bf16 (ties to even), as vcvtneps2bf16 rounds finite values.
inline uint32_t Bf16Bits(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x);
  return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
}

// 16 words lo[i] | hi[i] << 16 of two vectors rounded to bf16.
[[gnu::always_inline]] inline __m512i PairWords(V lo, V hi) {
  const __m512i a = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo)));
  const __m512i b = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(hi)));
  return _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
}

inline uint32_t LoadWord(const void* p) {
  uint32_t w;
  __builtin_memcpy(&w, p, sizeof(w));
  return w;
}

[[gnu::always_inline]] inline V Dot(V acc, __m512i a, uint32_t pair) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a),
                          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair))));
}

struct Bf16DotMath {
  // q as bf16 pairs along head_dim: word [d/2][lane] = q[d] | q[d + 1] << 16.
  static long QWords(int hd) { return static_cast<long>(hd + 1) / 2 * kWidth; }

  static void StoreQ(const float* q_row, int hd, int lane, float* q) {
    for (int d = 0; d < hd; d += 2) {
      const uint32_t lo = q_row != nullptr ? Bf16Bits(q_row[d]) : 0;
      const uint32_t hi = q_row != nullptr && d + 1 < hd ? Bf16Bits(q_row[d + 1]) : 0;
      const uint32_t word = lo | hi << 16;
      __builtin_memcpy(q + d / 2 * kWidth + lane, &word, sizeof(word));
    }
  }

  // K as bf16 rows (keys, hd): a bf16 pool's own; V as pairs of rows, word [j/2][d] =
  // v[j][d] | v[j + 1][d] << 16, 0 past the keys. Both after v_wide (AttentionScratchFloats).
  template <typename T>
  static void Block(const typename T::Elem* k_pool, const typename T::Elem* v_pool, long at,
                    int keys, int hd, int bs, float* k_wide, float* v_wide, const void** kb,
                    const void** vb) {
    uint16_t* k16 = reinterpret_cast<uint16_t*>(v_wide + static_cast<long>(bs) * (hd + 16));
    uint32_t* v2 = reinterpret_cast<uint32_t*>(k16) + static_cast<long>(bs) * hd / 2 + hd;
    *vb = v2;
    if constexpr (std::is_same_v<T, Bf16>) {
      *kb = k_pool + at;
      const uint16_t* v = v_pool + at;
      for (int j = 0; j < keys; j += 2) {
        const uint16_t* v0 = v + static_cast<long>(j) * hd;
        const uint16_t* v1 = j + 1 < keys ? v0 + hd : nullptr;
        uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
        int d = 0;
        for (; d + 16 <= hd; d += 16) {
          const __m512i a =
              _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v0 + d)));
          const __m512i b = v1 != nullptr ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                reinterpret_cast<const __m256i*>(v1 + d)))
                                          : _mm512_setzero_si512();
          _mm512_storeu_si512(out + d, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
        for (; d < hd; ++d) out[d] = v0[d] | (v1 != nullptr ? uint32_t{v1[d]} << 16 : 0u);
      }
    } else {
      const float* k;
      const float* v;
      RowsOf<T>(k_pool, v_pool, at, keys, hd, bs, k_wide, v_wide, &k, &v);
      *kb = k16;
      const long elems = static_cast<long>(keys) * hd;
      long i = 0;
      for (; i + 16 <= elems; i += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(k16 + i),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(Load(k + i))));
      }
      for (; i < elems; ++i) k16[i] = static_cast<uint16_t>(Bf16Bits(k[i]));
      for (int j = 0; j < keys; j += 2) {
        const float* v0 = v + static_cast<long>(j) * hd;
        const float* v1 = j + 1 < keys ? v0 + hd : nullptr;
        uint32_t* out = v2 + static_cast<long>(j / 2) * hd;
        int d = 0;
        for (; d + 16 <= hd; d += 16) {
          _mm512_storeu_si512(out + d,
                              PairWords(Load(v0 + d), v1 != nullptr ? Load(v1 + d) : Zero()));
        }
        for (; d < hd; ++d) out[d] = Bf16Bits(v0[d]) | (v1 != nullptr ? Bf16Bits(v1[d]) << 16 : 0u);
      }
    }
  }

  // s[j] (lanes: rows) = (Σ_pairs k_j · q) · scale for N keys (k: bf16 rows of hd).
  template <int N, int HD>
  [[gnu::always_inline]] static void ScorePass(const float* qt, const uint16_t* k, int hd_arg,
                                               V scale, float* s) {
    const int hd = HD > 0 ? HD : hd_arg;
    V a[N];
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) a[j] = Zero();
    for (int d = 0; d < hd; d += 2) {
      const __m512i q = _mm512_loadu_si512(qt + d / 2 * kWidth);
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j) a[j] = Dot(a[j], q, LoadWord(k + j * hd + d));
    }
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) Store(s + j * kWidth, Mul(a[j], scale));
  }

  // ot[d] (lanes: rows) = ot[d] · c + Σ_pairs p · v for the N dims from d0 (p: `pairs` words
  // per lane, v2 as Block leaves it).
  template <int N>
  [[gnu::always_inline]] static void ValuePass(const float* p, const uint32_t* v2, int pairs,
                                               int hd, int d0, V c, float* ot) {
    V a[N];
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) a[i] = Mul(Load(ot + (d0 + i) * kWidth), c);
    for (int jp = 0; jp < pairs; ++jp) {
      const __m512i pj = _mm512_loadu_si512(p + jp * kWidth);
      const uint32_t* vj = v2 + static_cast<long>(jp) * hd + d0;
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) a[i] = Dot(a[i], pj, vj[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) Store(ot + (d0 + i) * kWidth, a[i]);
  }

  template <int HD>
  static void Merge(const float* qt, const void* k_rows, const void* v_pairs, int n, int hd,
                    int hide, V scale, float* s, float* ml, float* ot) {
    const uint16_t* kb = static_cast<const uint16_t*>(k_rows);
    const uint32_t* v2 = static_cast<const uint32_t*>(v_pairs);
    int j = 0;
    for (; j + kKeysPerPass <= n; j += kKeysPerPass) {
      ScorePass<kKeysPerPass, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    }
    for (; j + 4 <= n; j += 4) ScorePass<4, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    for (; j < n; ++j) ScorePass<1, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    const V c = Softmax(s, n, hide, ml);
    // p as bf16 pairs of keys, in place: pair jp overwrites p_jp, read already (jp <= 2jp).
    const int pairs = (n + 1) / 2;
    for (int jp = 0; jp < pairs; ++jp) {
      const V lo = Load(s + 2 * jp * kWidth);
      const V hi = 2 * jp + 1 < n ? Load(s + (2 * jp + 1) * kWidth) : Zero();
      _mm512_storeu_si512(s + jp * kWidth, PairWords(lo, hi));
    }
    int d = 0;
    for (; d + kDimsPerPass <= hd; d += kDimsPerPass) {
      ValuePass<kDimsPerPass>(s, v2, pairs, hd, d, c, ot);
    }
    for (; d + 4 <= hd; d += 4) ValuePass<4>(s, v2, pairs, hd, d, c, ot);
    for (; d < hd; ++d) ValuePass<1>(s, v2, pairs, hd, d, c, ot);
  }
};

}  // namespace

void AttentionPrefillBf16Dot(const AttentionTile& t) { PrefillTile<Bf16DotMath>(t); }

}  // namespace PAGODA_ISA
}  // namespace pagoda
