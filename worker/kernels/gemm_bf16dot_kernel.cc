// The bf16-compute GEMM of Linear (AVX-512 table only): y (rows, n) = x (rows, k) · Wᵀ [+ bias]
// [+ y] with x rounded to bf16 as each step starts (PackRowsBf16) and W packed in bf16 pairs
// along k (kernels.h, PackedShape::compute_bf16), multiplied by AVX512_BF16's vdpbf16ps:
//
//   for kk2 < ⌈k/2⌉:  b0..b3 = panel[kk2][0 : 64][0 : 2]     (4 vectors of 16 columns × 2 k)
//                     for r < kRowTile:  a = broadcast x[r][2·kk2 : 2·kk2 + 2]   (one 32-bit word)
//                                        c[r][v] += a · b_v, pairwise   (v < 4; 2 k in one op)
//
// One instruction does the work of two f32 FMAs, and the weights are read as they are stored,
// with no widening: a batched step can run at up to twice the f32 kernel's speed.
// The products are exact in f32 and summed in f32, so the result differs from a float64 product
// of the bf16-rounded x and W only by f32 accumulation.
// Registers: 6 rows × 64 columns, 24 accumulators and 4 weight vectors of 32.
// isa.cc runs this file's functions only where the CPU has AVX512_BF16.
#include <cstdint>

#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

#if !defined(__AVX512F__)
#error "gemm_bf16dot_kernel.cc is built for the AVX-512 table only"
#endif
#pragma GCC target("avx512bf16")

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kColumns = PackedShape::kBf16Panel;  // 64 columns, 4 vectors
constexpr int kPairRow = 2 * kColumns;             // uint16s of one pair of k in a panel
// Rows 5 to 8 ran at one vdpbf16ps a cycle alike (215 GFLOP/s a core, Zen 4, in cache and
// from memory at 512 rows): 6 leaves registers to spare.
constexpr int kRowTile = kBf16RowTile;
static_assert(kRowTile == 6, "kTiles lists the tiles of 1 to 6 rows");
constexpr int kAccumulators = 4 * kRowTile;
#ifndef PAGODA_BF16DOT_KBLOCK
#define PAGODA_BF16DOT_KBLOCK 256
#endif
constexpr int kKBlock = PAGODA_BF16DOT_KBLOCK;  // even: blocks start at a whole pair
// Panel pairs (256 bytes, 4 lines each) prefetched this many ahead (8 KB) into L2 (GemmBf16Dot
// says when). One core's decode of 2048 -> 2048 read 0.57 of the streaming roof without; with 8 to
// 32 about the f32 kernel's 0.85, and 32 into L2 a little more than 16 into L1 (A/B runs of 5, all
// three TinyLlama shapes, 1 and 2 threads).
constexpr int kPrefetchPairs = 32;

inline __m512bh Bh(__m512i v) { return __builtin_bit_cast(__m512bh, v); }

// The mask of the lanes of vector v (16 columns) below `cols`.
inline __mmask16 ColumnMask(int v, int cols) {
  const int n = cols - 16 * v;
  return n >= 16  ? static_cast<__mmask16>(0xFFFF)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

// y[r][0 : cols] (= or +=) c[r] + bias for the M rows of a tile.
template <int M>
inline void Store(const V (&c)[M][4], const float* bias, bool accumulate, float* __restrict y,
                  int ldy, int cols) {
  __mmask16 mask[4];
  V b[4];
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    mask[v] = ColumnMask(v, cols);
    b[v] = bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : Zero();
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    float* dst = y + static_cast<size_t>(r) * ldy;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      V out = Add(c[r][v], b[v]);
      if (accumulate) out = Add(out, _mm512_maskz_loadu_ps(mask[v], dst + 16 * v));
      _mm512_mask_storeu_ps(dst + 16 * v, mask[v], out);
    }
  }
}

// Rows [0, M) of a row tile of x (a[kk2][r], kRowTile words per pair) against pairs
// [0, pairs) of one panel. With few rows the 4·M chains of vdpbf16ps would wait on their own
// latency, so S interleaved pairs keep S independent chains per accumulator, summed at the end.
// `Prefetch`: ask for the panel kPrefetchPairs ahead.
template <int M, bool Prefetch>
void Tile(const uint32_t* __restrict a, const uint16_t* __restrict panel, int pairs,
          const float* bias, bool accumulate, float* __restrict y, int ldy, int cols) {
  constexpr int S = 8 * M <= kAccumulators ? (16 * M <= kAccumulators ? 4 : 2) : 1;
  V c[S][M][4];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[s][r][v] = Zero();
    }
  }
  int p = 0;
  for (; p + S <= pairs; p += S) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const uint16_t* w = panel + static_cast<size_t>(p + s) * kPairRow;
      if constexpr (Prefetch) {
#pragma GCC unroll 4
        for (int line = 0; line < 4; ++line) {
          _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchPairs * kPairRow + 32 * line),
                       _MM_HINT_T1);
        }
      }
      __m512i b[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) b[v] = _mm512_loadu_si512(w + 32 * v);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const __m512bh ar = Bh(_mm512_set1_epi32(static_cast<int>(a[(p + s) * kRowTile + r])));
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) c[s][r][v] = _mm512_dpbf16_ps(c[s][r][v], ar, Bh(b[v]));
      }
    }
  }
  for (; p < pairs; ++p) {
    const uint16_t* w = panel + static_cast<size_t>(p) * kPairRow;
    __m512i b[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) b[v] = _mm512_loadu_si512(w + 32 * v);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const __m512bh ar = Bh(_mm512_set1_epi32(static_cast<int>(a[p * kRowTile + r])));
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[0][r][v] = _mm512_dpbf16_ps(c[0][r][v], ar, Bh(b[v]));
    }
  }
#pragma GCC unroll 4
  for (int s = 1; s < S; ++s) {
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[0][r][v] = Add(c[0][r][v], c[s][r][v]);
    }
  }
  Store<M>(c[0], bias, accumulate, y, ldy, cols);
}

using TileFn = void (*)(const uint32_t*, const uint16_t*, int, const float*, bool, float*, int,
                        int);

template <bool Prefetch, int... M>
struct TileTable {
  static constexpr TileFn kFns[] = {nullptr, &Tile<M, Prefetch>...};
};
constexpr const TileFn* kTiles = TileTable<false, 1, 2, 3, 4, 5, 6>::kFns;  // kRowTile
constexpr const TileFn* kPrefetchTiles = TileTable<true, 1, 2, 3, 4, 5, 6>::kFns;

// FloatToBf16's rounding (common/numeric.h): to nearest even, NaN kept a quiet NaN.
inline uint32_t RoundToBf16(float f) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits >> 16) | 0x40;
  return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
}

}  // namespace

void PackRowsBf16(const float* x, int rows, int k, int tile_begin, int tile_end, uint32_t* packed) {
  const int pairs = Bf16KPadded(k) / 2;
  for (int t = tile_begin; t < tile_end; ++t) {
    const int r0 = t * kRowTile, m = MinInt(kRowTile, rows - r0);
    uint32_t* dst = packed + static_cast<size_t>(t) * kRowTile * pairs;
    for (int r = 0; r < kRowTile; ++r) {
      if (r >= m) {  // rows past the end: zero, so no NaN of old memory reaches a sum
        for (int p = 0; p < pairs; ++p) dst[p * kRowTile + r] = 0;
        continue;
      }
      const float* src = x + static_cast<size_t>(r0 + r) * k;
      int p = 0;
      for (; 2 * p + 1 < k; ++p) {
        dst[p * kRowTile + r] = RoundToBf16(src[2 * p]) | RoundToBf16(src[2 * p + 1]) << 16;
      }
      for (; p < pairs; ++p) dst[p * kRowTile + r] = 2 * p < k ? RoundToBf16(src[2 * p]) : 0;
    }
  }
}

void GemmBf16Dot(const uint32_t* packed_x, int rows, const uint16_t* packed,
                 const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                 bool accumulate, float* y, int ldy) {
  const size_t panel_elements = static_cast<size_t>(shape.k_padded) * kColumns;
  const int pairs = (shape.k + 1) / 2, tile_words = kRowTile * shape.k_padded / 2;
  // Blocks of kKBlock along k keep the panel's block (kKBlock × 64 bf16, 32 KB) in L1/L2 and the
  // row tiles' x in L2 while every row tile passes over it; the first block stores bias (and
  // y, if accumulating), later ones add to it. One row tile has nothing to share: k whole.
  const int block_pairs = rows <= kRowTile ? pairs : kKBlock / 2;
  // Prefetching helps a decode (1 row: 0.57 -> 0.85 of the roof) and the k blocks of many rows
  // (12 and 32 rows: 165 -> 190 and 196 -> 208 GFLOP/s a core), but one tile of 2 to 6 rows
  // streamed from memory ran slower with it (2 rows: 0.80 -> 0.61 of the roof; 6: 0.83 -> 0.75).
  const TileFn* tiles = rows == 1 || rows > kRowTile ? kPrefetchTiles : kTiles;
  for (int pn = panel_begin; pn < panel_end; ++pn) {
    const uint16_t* panel = packed + pn * panel_elements;
    const int col = pn * kColumns;
    const int cols = MinInt(kColumns, shape.n - col);
    const float* panel_bias = bias ? bias + col : nullptr;
    for (int p0 = 0; p0 < pairs; p0 += block_pairs) {
      const int pc = MinInt(block_pairs, pairs - p0);
      for (int r = 0; r < rows; r += kRowTile) {
        const int m = MinInt(kRowTile, rows - r);
        tiles[m](packed_x + static_cast<size_t>(r / kRowTile) * tile_words + p0 * kRowTile,
                 panel + static_cast<size_t>(p0) * kPairRow, pc, p0 == 0 ? panel_bias : nullptr,
                 p0 == 0 ? accumulate : true, y + static_cast<size_t>(r) * ldy + col, ldy, cols);
      }
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
