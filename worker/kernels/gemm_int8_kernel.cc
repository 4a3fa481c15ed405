// The int8 GEMM of Linear for one ISA: weights in blocks of 32 along k with one f16 scale per
// column and block (Q8_0's precision), activations quantized the same way per row as each step
// starts (QuantizeRows), integer dot products within a block, and f32 across blocks:
//
//   y[r][j] = Σ_b  xs[r][b] · ws[b][j] · Σ_{kk in b} xq[r][kk] · wq[j][kk]
//
// AVX-512 uses VNNI's vpdpbusd (4 unsigned × signed byte products into each int32 lane, one
// instruction per 4 k x 16 columns): the weights are stored + 128 as unsigned bytes and each
// row's block starts from −128 · Σ xq to take the offset back out. AVX2 has no such
// instruction; it multiplies |xq| by sign(xq)·wq with vpmaddubsw (pairs to int16, at most
// 2·127·127, so nothing saturates) and vpmaddwd (pairs to int32).
// Registers: AVX-512 6 rows x 32 columns (12 int32 and 12 f32 accumulators); AVX2 2 x 16.
#include <cstdint>
#include <cstring>

#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

#if defined(__AVX512F__)
#pragma GCC target("avx512vnni")  // isa.cc runs this table's int8 kernel only where VNNI is
#endif

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kBlock = PackedShape::kInt8Block;
constexpr int kRowTile = kInt8RowTile;
#if defined(__AVX512F__)
using I = __m512i;
#else
using I = __m256i;
#endif
constexpr int kGroups = kBlock / 4;                        // int32 lanes of 4 k per block
constexpr int kBlockBytes = kBlock * kPanel + 2 * kPanel;  // the bytes, then f16 scales

int32_t Word(const uint8_t* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// x laid out as a QuantizeRows tile of XT rows (kRowTile, or 1 for a row gathered by
// RunQuantizedPanels).
template <int M, int XT = kRowTile>
void Tile(const uint8_t* __restrict a, const uint8_t* __restrict panel, int num_blocks,
          const float* bias, bool accumulate, float* __restrict y, int ldy, int cols) {
  V c0[M], c1[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) c0[r] = c1[r] = Zero();
  for (int b = 0; b < num_blocks; ++b) {
    const uint8_t* w = panel + static_cast<size_t>(b) * kBlockBytes;
    const uint8_t* x = a + b * XBlockBytes(XT);
    const float* x_scale = reinterpret_cast<const float*>(x + 32 * XT);
    I i0[M], i1[M];
#if defined(__AVX512F__)
    const uint8_t* x_offset = x + 36 * XT;
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) i0[r] = i1[r] = _mm512_set1_epi32(Word(x_offset + 4 * r));
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const I w0 = _mm512_loadu_si512(w + g * 4 * kPanel);
      const I w1 = _mm512_loadu_si512(w + g * 4 * kPanel + 64);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const I xr = _mm512_set1_epi32(Word(x + (g * XT + r) * 4));
        i0[r] = _mm512_dpbusd_epi32(i0[r], w0, xr);
        i1[r] = _mm512_dpbusd_epi32(i1[r], w1, xr);
      }
    }
    const V s0 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kBlock * kPanel)));
    const V s1 = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kBlock * kPanel + 32)));
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const V xs = Set1(x_scale[r]);
      c0[r] = Fma(_mm512_cvtepi32_ps(i0[r]), Mul(s0, xs), c0[r]);
      c1[r] = Fma(_mm512_cvtepi32_ps(i1[r]), Mul(s1, xs), c1[r]);
    }
#else
    const I ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) i0[r] = i1[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const I w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * 4 * kPanel));
      const I w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * 4 * kPanel + 32));
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const I xr = _mm256_set1_epi32(Word(x + (g * XT + r) * 4));
        const I ax = _mm256_abs_epi8(xr);
        i0[r] = _mm256_add_epi32(
            i0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xr)), ones));
        i1[r] = _mm256_add_epi32(
            i1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xr)), ones));
      }
    }
    const V s0 =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + kBlock * kPanel)));
    const V s1 = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + kBlock * kPanel + 16)));
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const V xs = Set1(x_scale[r]);
      c0[r] = Fma(_mm256_cvtepi32_ps(i0[r]), Mul(s0, xs), c0[r]);
      c1[r] = Fma(_mm256_cvtepi32_ps(i1[r]), Mul(s1, xs), c1[r]);
    }
#endif
  }
  StoreTile<M>(c0, c1, bias, accumulate, y, ldy, cols);
}

using TileFn = QuantizedTileFn;

template <int... M>
struct TileTable {
  static constexpr TileFn kFns[] = {nullptr, &Tile<M>...};
};

#if defined(__AVX512F__)
constexpr const TileFn* kTiles = TileTable<1, 2, 3, 4, 5, 6>::kFns;
#else
constexpr const TileFn* kTiles = TileTable<1, 2>::kFns;
#endif

// Row r of a block whose 32 k are all present, into its words of the tile (stride kRowTile
// words): the same values as the scalar loop below (cvtps rounds to nearest even, as
// nearbyint does in the default rounding mode), one vector pass instead of 32 scalar ones.
// Returns Σ q; *scale = amax / 127.
inline int32_t QuantizeFullBlock(const float* __restrict src, uint8_t* __restrict q, float* scale) {
#if defined(__AVX512F__)
  const V v0 = Load(src), v1 = Load(src + kWidth);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const V inverse = Set1(amax > 0.0f ? 127.0f / amax : 0.0f);
  const I lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const I q0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(Mul(v0, inverse)), lo), hi);
  const I q1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(Mul(v1, inverse)), lo), hi);
  alignas(32) uint8_t bytes[kBlock];
  _mm_store_si128(reinterpret_cast<__m128i*>(bytes), _mm512_cvtepi32_epi8(q0));
  _mm_store_si128(reinterpret_cast<__m128i*>(bytes + 16), _mm512_cvtepi32_epi8(q1));
  const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
#else
  V v[4];
  V m = Zero();
  const V sign = Set1(-0.0f);
  for (int i = 0; i < 4; ++i) {
    v[i] = Load(src + i * kWidth);
    m = Max(m, _mm256_andnot_ps(sign, v[i]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  const V inverse = Set1(amax > 0.0f ? 127.0f / amax : 0.0f);
  const I lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  I qi[4];
  I sum8 = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    qi[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(Mul(v[i], inverse)), lo), hi);
    sum8 = _mm256_add_epi32(sum8, qi[i]);
  }
  // packs interleave the 128-bit lanes: words (0, 4, 1, 5, 2, 6, 3, 7) put k back in order.
  const I packed =
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  alignas(32) uint8_t bytes[kBlock];
  _mm256_store_si256(
      reinterpret_cast<__m256i*>(bytes),
      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  const int32_t sum = _mm_cvtsi128_si32(s4);
#endif
  for (int g = 0; g < kGroups; ++g) std::memcpy(q + g * kRowTile * 4, bytes + 4 * g, 4);
  *scale = amax / 127.0f;
  return sum;
}

}  // namespace

void QuantizeRows(const float* x, int rows, int k, int k_padded, int tile_begin, int tile_end,
                  uint8_t* packed) {
  const int num_blocks = k_padded / kBlock;
  for (int t = tile_begin; t < tile_end; ++t) {
    uint8_t* tile = packed + static_cast<size_t>(t) * num_blocks * 40 * kRowTile;
    for (int b = 0; b < num_blocks; ++b) {
      uint8_t* q = tile + static_cast<size_t>(b) * 40 * kRowTile;
      float* scale = reinterpret_cast<float*>(q + 32 * kRowTile);
      int32_t* offset = reinterpret_cast<int32_t*>(q + 36 * kRowTile);
      const int k0 = b * kBlock, n = MinInt(kBlock, k - k0);
      for (int r = 0; r < kRowTile; ++r) {
        const int row = t * kRowTile + r;
        if (row >= rows) {  // the tile's padding: zeros (a decode's tile is 1 row and 5 of them)
          for (int g = 0; g < kGroups; ++g) std::memset(q + (g * kRowTile + r) * 4, 0, 4);
          scale[r] = 0.0f;
          offset[r] = 0;
          continue;
        }
        const float* src = x + static_cast<size_t>(row) * k + k0;
        if (n == kBlock) {
          offset[r] = -128 * QuantizeFullBlock(src, q + 4 * r, &scale[r]);
          continue;
        }
        float amax = 0.0f;
        for (int i = 0; i < n; ++i) amax = MaxFloat(amax, __builtin_fabsf(src[i]));
        const float d = amax / 127.0f, inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < kBlock; ++i) {
          int v = 0;
          if (i < n) {
            v = static_cast<int>(__builtin_nearbyintf(src[i] * inverse));
            v = v > 127 ? 127 : v < -127 ? -127 : v;
          }
          q[((i / 4) * kRowTile + r) * 4 + i % 4] = static_cast<uint8_t>(static_cast<int8_t>(v));
          sum += v;
        }
        scale[r] = d;
        offset[r] = -128 * sum;
      }
    }
  }
}

void GemmInt8(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy) {
  RunQuantizedPanels(kTiles, &Tile<1, 1>, kRowTile, packed_x, rows, packed, shape, panel_begin,
                     panel_end, bias, accumulate, y, ldy);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
