// The int4 GEMM of one ISA: weights as 4-bit q ∈ [0, 15] in blocks of 32 along k with Q4_0's or
// Q4_K's scales (kernels.h, PackedShape), activations quantized per row and block of 32 by
// QuantizeRows (the int8 GEMM's format), integer dot products within a block and f32 across:
//
//   y[r][j] = Σ_b  xs[r][b] · (s[b][j] · Σ_{kk in b} xq[r][kk] · q[j][kk] − m[b][j] · Σ xq[r][b])
//
// with s = d, m = 8·d for Q4_0 (the offset then folds into the integer sum: it starts from
// −8 · Σ xq, a shift of QuantizeRows' −128 · Σ xq) and s = d·sc, m = dmin·m for Q4_K.
// One vector load holds a group of 4 k of the whole panel: the low nibbles are its first half of
// columns, the high nibbles its second; an and and a shift unpack them in registers (an and
// alone for AVX-512's one-row tile: HighInPlace below).
// AVX-512 multiplies with VNNI's vpdpbusd (unsigned q by signed xq); AVX2 with vpmaddubsw, whose
// pairs are at most 2·15·127 = 3810 (no saturation), summed in int16 over the block and
// widened by vpmaddwd by ones.
// Registers: AVX-512 6 rows x 32 columns (12 int32 and 12 f32 accumulators); AVX2 2 x 16.
#include <cstdint>
#include <cstring>

#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

#if defined(__AVX512F__)
#pragma GCC target("avx512vnni")  // isa.cc runs this table's int4 kernel only where VNNI is
#endif

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kRowTile = kInt8RowTile;
constexpr int kGroups = 8;                    // groups of 4 k in a block of 32
constexpr int kHalf = kPanel / 2;             // columns of one nibble of the bytes
constexpr size_t kNibbleBytes = 16 * kPanel;  // of a block; its scales follow
constexpr size_t kBlockBytes = 18 * kPanel;   // PackedShape::int4_block_bytes
constexpr size_t kHeaderBytes = 4 * kPanel;   // PackedShape::int4_header_bytes
constexpr int kQ4KBlocks = PackedShape::kQ4KBlocks;
// No software prefetch: with x of a decode gathered dense (RunQuantizedPanels), 2 to 16 KB ahead
// into L1 or L2 read 0.05 to 0.2 of the roof less than the hardware's prefetch alone (2 threads).

#if defined(__AVX512F__)
using I = __m512i;
inline I LoadI(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline I Set1I(int32_t v) { return _mm512_set1_epi32(v); }
inline I ZeroI() { return _mm512_setzero_si512(); }
inline I LowNibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline I HighNibbles(I v) { return LowNibbles(_mm512_srli_epi16(v, 4)); }
// A decode (one row) leaves the nibbles in place: the low columns are multiplied by the whole
// byte, lo + 16·hi, and the high ones by 16·hi (one and), whose sum is then taken back out of
// the low ones'; a block's sums stay below 32·255·127 < 2^31, and the high columns' scale takes
// 1/16 (exact). One op per group to unpack, not three: a decode is short of instructions to
// overlap with its loads, while a tile of more rows spreads the unpacking over them.
constexpr bool kInPlace = true;
inline I HighInPlace(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(0xF0))); }
inline I SubI(I a, I b) { return _mm512_sub_epi32(a, b); }
// A block's integer sums: Dot adds 4 products of q and x per int32 lane; Sum gives the lanes.
inline I Dot(I acc, I q, I x) { return _mm512_dpbusd_epi32(acc, q, x); }
inline I Sum(I acc) { return acc; }
inline I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
inline V ToFloat(I v) { return _mm512_cvtepi32_ps(v); }
// kHalf f16 or u8 values at p as floats.
inline V HalvesToFloat(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline V BytesToFloat(const uint8_t* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#else
using I = __m256i;
inline I LoadI(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline I Set1I(int32_t v) { return _mm256_set1_epi32(v); }
inline I ZeroI() { return _mm256_setzero_si256(); }
inline I LowNibbles(I v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline I HighNibbles(I v) { return LowNibbles(_mm256_srli_epi16(v, 4)); }
// vpmaddubsw saturates int16 pairs (16·hi would reach 2·240·127): always unpacked.
constexpr bool kInPlace = false;
inline I HighInPlace(I v) { return v; }
inline I SubI(I a, I b) { return _mm256_sub_epi32(a, b); }
// int16 lanes of pairs: 8 groups of at most 2·15·127 sum to ≤ 30480, so a block's products
// stay in int16 and only its end widens them (one vpmaddwd per vector, not one per group).
inline I Dot(I acc, I q, I x) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(q, x)); }
inline I Sum(I acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
inline I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
inline V ToFloat(I v) { return _mm256_cvtepi32_ps(v); }
inline V HalvesToFloat(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline V BytesToFloat(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#endif

int32_t Word(const uint8_t* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// A register tile of M rows over one panel; kQ4K picks the scales (else Q4_0's). x is laid out
// as a QuantizeRows tile of XT rows (kRowTile, or 1 for a row gathered by RunQuantizedPanels).
template <bool kQ4K, int M, int XT = kRowTile>
void Tile(const uint8_t* __restrict a, const uint8_t* __restrict panel, int num_blocks,
          const float* bias, bool accumulate, float* __restrict y, int ldy, int cols) {
  constexpr bool kHighInPlace = kInPlace && M == 1;
  constexpr int kHighShift = kHighInPlace ? 4 : 0;  // the high columns' sums are 2^this × theirs
  constexpr float kHighScale = 1.0f / (1 << kHighShift);
  V c0[M], c1[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) c0[r] = c1[r] = Zero();
  const uint8_t* w = panel;
  // kQ4K: the header's f16 d [kPanel] and dmin [kPanel] as floats, converted once per 8 blocks.
  V d0 = Zero(), d1 = Zero(), dmin0 = Zero(), dmin1 = Zero();
  for (int b = 0; b < num_blocks; ++b) {
    if (kQ4K && b % kQ4KBlocks == 0) {
      d0 = HalvesToFloat(w);
      d1 = Mul(HalvesToFloat(w + 2 * kHalf), Set1(kHighScale));
      dmin0 = HalvesToFloat(w + 2 * kPanel);
      dmin1 = HalvesToFloat(w + 2 * kPanel + 2 * kHalf);
      w += kHeaderBytes;
    }
    const uint8_t* x = a + b * XBlockBytes(XT);
    const float* x_scale = reinterpret_cast<const float*>(x + 32 * XT);
    const uint8_t* x_offset = x + 36 * XT;  // int32 −128 · Σ xq per row
    I i0[M], i1[M];
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) i0[r] = i1[r] = ZeroI();
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const I bytes = LoadI(w + g * 2 * kPanel);
      const I q0 = kHighInPlace ? bytes : LowNibbles(bytes);
      const I q1 = kHighInPlace ? HighInPlace(bytes) : HighNibbles(bytes);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const I xr = Set1I(Word(x + (g * XT + r) * 4));
        i0[r] = Dot(i0[r], q0, xr);
        i1[r] = Dot(i1[r], q1, xr);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      i1[r] = Sum(i1[r]);
      i0[r] = kHighInPlace ? SubI(i0[r], i1[r]) : Sum(i0[r]);
      if (!kQ4K) {
        // Q4_0's −8 per weight: −8 · Σ xq, exactly QuantizeRows' −128 · Σ xq shifted (and
        // 2^kHighShift times that for the high columns).
        const int32_t offset = Word(x_offset + 4 * r);
        i0[r] = AddI(i0[r], Set1I(offset >> 4));
        i1[r] = AddI(i1[r], Set1I(offset >> (4 - kHighShift)));
      }
    }
    const uint8_t* scales = w + kNibbleBytes;
    if (kQ4K) {
      const V s0 = Mul(d0, BytesToFloat(scales));
      const V s1 = Mul(d1, BytesToFloat(scales + kHalf));
      const V m0 = Mul(dmin0, BytesToFloat(scales + kPanel));
      const V m1 = Mul(dmin1, BytesToFloat(scales + kPanel + kHalf));
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const V xs = Set1(x_scale[r]);
        const V x_sum = Set1(x_scale[r] * static_cast<float>(Word(x_offset + 4 * r) / -128));
        c0[r] = Fnma(m0, x_sum, Fma(ToFloat(i0[r]), Mul(s0, xs), c0[r]));
        c1[r] = Fnma(m1, x_sum, Fma(ToFloat(i1[r]), Mul(s1, xs), c1[r]));
      }
    } else {
      const V s0 = HalvesToFloat(scales), s1 = HalvesToFloat(scales + 2 * kHalf);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const V xs = Set1(x_scale[r]), xs_high = Set1(x_scale[r] * kHighScale);
        c0[r] = Fma(ToFloat(i0[r]), Mul(s0, xs), c0[r]);
        c1[r] = Fma(ToFloat(i1[r]), Mul(s1, xs_high), c1[r]);
      }
    }
    w += kBlockBytes;
  }
  StoreTile<M>(c0, c1, bias, accumulate, y, ldy, cols);
}

using TileFn = QuantizedTileFn;

template <bool kQ4K, int... M>
struct TileTable {
  static constexpr TileFn kFns[] = {nullptr, &Tile<kQ4K, M>...};
};

#if defined(__AVX512F__)
constexpr const TileFn* kQ40Tiles = TileTable<false, 1, 2, 3, 4, 5, 6>::kFns;
constexpr const TileFn* kQ4KTiles = TileTable<true, 1, 2, 3, 4, 5, 6>::kFns;
#else
constexpr const TileFn* kQ40Tiles = TileTable<false, 1, 2>::kFns;
constexpr const TileFn* kQ4KTiles = TileTable<true, 1, 2>::kFns;
#endif

}  // namespace

void GemmInt4(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy) {
  const bool q4k = shape.int4_scales == PackedShape::Int4Scales::kQ4_K;
  RunQuantizedPanels(q4k ? kQ4KTiles : kQ40Tiles, q4k ? &Tile<true, 1, 1> : &Tile<false, 1, 1>,
                     kRowTile, packed_x, rows, packed, shape, panel_begin, panel_end, bias,
                     accumulate, y, ldy);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
