// The Q6_K GEMM of one ISA: weights as Q6_K's 6-bit q ∈ [0, 63] with an int8 scale per 16 k and
// an f16 d per 256 (kernels.h, PackedShape's q6_k layout), activations quantized per row and
// block of 32 by QuantizeRows (the int8 GEMM's format), integer dot products within a block and
// f32 across:
//
//   y[r][j] = Σ_b  xs[r][b] · d[j] · Σ_{h = 0, 1} sc[h][j] · Σ_{kk in half h of b} xq · (q − 32)
//
// The −32 is taken out per half block through the sum of xq, 32 · Σ xq, made by the same dot
// product against a vector of 32s. One vector load holds a group of 4 k of the whole panel: the
// low nibbles are its first half of columns, the high nibbles its second, and a vector of the
// high 2 bits serves two groups; ands, shifts and ors unpack them in registers.
// AVX-512 multiplies with VNNI's vpdpbusd (unsigned q by signed xq) into int32 and scales with
// vpmulld; AVX2 with vpmaddubsw, its pairs at most 2·63·127 (no saturation), summed in int16
// over a half block: the sums wrap, but their difference with the 32 · Σ xq ones, at most
// 8·32·127 = 32512 in magnitude, is exact, and vpmaddwd by the scales widens it. The two
// halves' scaled sums add in int32 (at most 2·16·32·127·128 < 2^24 in magnitude), and a block
// takes one f32 step.
// Registers: AVX-512 3 rows x 32 columns (a QuantizeRows tile of 6 rows in two passes: each row
// holds 7 vectors); AVX2 2 x 16.
#include <cstdint>
#include <cstring>

#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

#if defined(__AVX512F__)
#pragma GCC target("avx512vnni")  // isa.cc runs this table's Q6_K kernel only where VNNI is
#endif

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kRowTile = kInt8RowTile;  // rows of a QuantizeRows tile
#if defined(__AVX512F__)
constexpr int kTileRows = 3;  // rows of a register tile
#else
constexpr int kTileRows = 2;
#endif
static_assert(kRowTile % kTileRows == 0, "a register tile within one QuantizeRows tile");
constexpr int kHalf = kPanel / 2;                 // columns of one nibble of the bytes
constexpr size_t kGroupBytes = 2 * kPanel;        // a vector: 4 k of the panel
constexpr size_t kHighBytes = 16 * kPanel;        // offset of the high 2 bits in a block
constexpr size_t kScaleBytes = 24 * kPanel;       // offset of the int8 scales
constexpr size_t kBlockBytes = 26 * kPanel;       // PackedShape::q6k_block_bytes
constexpr size_t kHeaderBytes = 2 * kPanel;       // PackedShape::q6k_header_bytes
constexpr int kBlocks = PackedShape::kQ4KBlocks;  // blocks of 32 under one header
// No software prefetch: 2 and 4 KB ahead read less of the roof than without (2 threads).

#if defined(__AVX512F__)
using I = __m512i;
inline I LoadI(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline I Set1I(int32_t v) { return _mm512_set1_epi32(v); }
inline I Bytes(int8_t v) { return _mm512_set1_epi8(v); }
inline I ZeroI() { return _mm512_setzero_si512(); }
inline I And(I a, I b) { return _mm512_and_si512(a, b); }
inline I Or(I a, I b) { return _mm512_or_si512(a, b); }
inline I ShiftLeft16(I v, int n) { return _mm512_slli_epi16(v, n); }
inline I ShiftRight16(I v, int n) { return _mm512_srli_epi16(v, n); }
// Dot adds 4 products of unsigned q and signed x per int32 lane.
inline I Dot(I acc, I q, I x) { return _mm512_dpbusd_epi32(acc, q, x); }
inline I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
// sc · (Σ q·x − 32 · Σ x) per column.
inline I Scaled(I acc, I offset, I sc) {
  return _mm512_mullo_epi32(_mm512_sub_epi32(acc, offset), sc);
}
// The kPanel int8 scales at p as Scaled takes them: *first for the low-nibble columns, *second
// for the high-nibble ones.
inline void LoadScales(const uint8_t* p, I* first, I* second) {
  *first = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  *second = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kHalf)));
}
inline V ToFloat(I v) { return _mm512_cvtepi32_ps(v); }
inline V HalvesToFloat(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
#else
using I = __m256i;
inline I LoadI(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline I Set1I(int32_t v) { return _mm256_set1_epi32(v); }
inline I Bytes(int8_t v) { return _mm256_set1_epi8(v); }
inline I ZeroI() { return _mm256_setzero_si256(); }
inline I And(I a, I b) { return _mm256_and_si256(a, b); }
inline I Or(I a, I b) { return _mm256_or_si256(a, b); }
inline I ShiftLeft16(I v, int n) { return _mm256_slli_epi16(v, n); }
inline I ShiftRight16(I v, int n) { return _mm256_srli_epi16(v, n); }
// int16 lanes of pairs, wrapping (see the top of the file).
inline I Dot(I acc, I q, I x) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(q, x)); }
inline I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
inline I Scaled(I acc, I offset, I sc) {
  return _mm256_madd_epi16(_mm256_sub_epi16(acc, offset), sc);
}
// Each int32 lane the column's scale twice, as int16: vpmaddwd multiplies both halves by it.
inline void LoadScales(const uint8_t* p, I* first, I* second) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  *first = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v));
  *second = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(v, v));
}
inline V ToFloat(I v) { return _mm256_cvtepi32_ps(v); }
inline V HalvesToFloat(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#endif

int32_t Word(const uint8_t* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// A register tile of M rows over one panel; `a` points at the first row's words in the
// QuantizeRows tile (every per-row field of a tile is 4 bytes a row, so an offset of 4 bytes a
// row serves them all), of XT rows (kRowTile, or 1 for a row gathered by RunQuantizedPanels).
template <int M, int XT = kRowTile>
void Tile(const uint8_t* __restrict a, const uint8_t* __restrict panel, int num_blocks,
          const float* bias, bool accumulate, float* __restrict y, int ldy, int cols) {
  V c0[M], c1[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) c0[r] = c1[r] = Zero();
  const I low4 = Bytes(0x0F), high2 = Bytes(0x30), thirty_two = Bytes(32);
  const uint8_t* w = panel;
  const uint8_t* header = panel;  // f16 d [kPanel]
  for (int b = 0; b < num_blocks; ++b) {
    if (b % kBlocks == 0) {
      header = w;
      w += kHeaderBytes;
    }
    const uint8_t* x = a + b * XBlockBytes(XT);
    const float* x_scale = reinterpret_cast<const float*>(x + 32 * XT);
    I s0[M], s1[M];  // the block's sum of both halves, scaled
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // the halves of 16 k, each with its scales
      I i0[M], i1[M], offset[M];
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) i0[r] = i1[r] = offset[r] = ZeroI();
#pragma GCC unroll 4
      for (int g = 4 * h; g < 4 * h + 4; ++g) {
        const I bytes = LoadI(w + g * kGroupBytes);
        const I high = LoadI(w + kHighBytes + (g / 2) * kGroupBytes);
        // Group 2t: bits 4-5 (first half of the columns) and 6-7; group 2t + 1: 0-1 and 2-3.
        const I top0 = g % 2 == 0 ? high : ShiftLeft16(high, 4);
        const I top1 = g % 2 == 0 ? ShiftRight16(high, 2) : ShiftLeft16(high, 2);
        const I q0 = Or(And(bytes, low4), And(top0, high2));
        const I q1 = Or(And(ShiftRight16(bytes, 4), low4), And(top1, high2));
#pragma GCC unroll 8
        for (int r = 0; r < M; ++r) {
          const I xr = Set1I(Word(x + (g * XT + r) * 4));
          i0[r] = Dot(i0[r], q0, xr);
          i1[r] = Dot(i1[r], q1, xr);
          offset[r] = Dot(offset[r], thirty_two, xr);
        }
      }
      I sc0, sc1;
      LoadScales(w + kScaleBytes + h * kPanel, &sc0, &sc1);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const I t0 = Scaled(i0[r], offset[r], sc0), t1 = Scaled(i1[r], offset[r], sc1);
        s0[r] = h == 0 ? t0 : AddI(s0[r], t0);
        s1[r] = h == 0 ? t1 : AddI(s1[r], t1);
      }
    }
    const V d0 = HalvesToFloat(header), d1 = HalvesToFloat(header + 2 * kHalf);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const V xs = Set1(x_scale[r]);
      c0[r] = Fma(ToFloat(s0[r]), Mul(d0, xs), c0[r]);
      c1[r] = Fma(ToFloat(s1[r]), Mul(d1, xs), c1[r]);
    }
    w += kBlockBytes;
  }
  StoreTile<M>(c0, c1, bias, accumulate, y, ldy, cols);
}

using TileFn = QuantizedTileFn;

template <int... M>
struct TileTable {
  static constexpr TileFn kFns[] = {nullptr, &Tile<M>...};
};

#if defined(__AVX512F__)
constexpr const TileFn* kTiles = TileTable<1, 2, 3>::kFns;
#else
constexpr const TileFn* kTiles = TileTable<1, 2>::kFns;
#endif

}  // namespace

void GemmQ6K(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
             int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
             int ldy) {
  RunQuantizedPanels(kTiles, &Tile<1, 1>, kTileRows, packed_x, rows, packed, shape, panel_begin,
                     panel_end, bias, accumulate, y, ldy);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
