// The f32 and bf16 GEMMs of Linear for one ISA: y (rows, n) = x (rows, k) · Wᵀ [+ bias] [+ y],
// W packed in panels (kernels.h). For each panel, row blocks of kRowTile rows keep a
// (kRowTile, 2 vectors) tile of y in registers while the panel streams past once:
//
//   for kk < k:   b0 b1 = panel[kk][0 : 2·kWidth]          (two f32 vectors)
//                 for r < kRowTile:  a = broadcast x[r][kk];  c[r] += a·b0, a·b1
//
// bf16 weights are widened to f32 as they are loaded (one load, a shift and a mask), so both
// precisions multiply in f32: bf16 halves the bytes a decode reads, and costs a batched step
// two integer operations per 2·kRowTile FMAs.
// x is first packed by row tiles (PackRows): the broadcasts of a tile then read one sequential
// stream, where rows k floats apart (8 KB for k = 2048) would fight over the same L1 sets.
// AVX-512: 12 rows x 32 columns (24 accumulators of 32 registers); AVX2: 6 x 16 (12 of 16).
// The panel (k_padded x 32 floats, ≤ 720 KB for k = 5632) stays in L2 across the row blocks,
// so each weight is read from memory once per call whatever the row count.
#include <cstdint>

#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

#ifndef PAGODA_GEMM_KBLOCK
#define PAGODA_GEMM_KBLOCK 256
#endif
constexpr int kKBlock = PAGODA_GEMM_KBLOCK;
// A decode's bf16 panel rows, prefetched this many ahead (3 KB at AVX-512): one core's
// stories110M decode took 14.8 ms against 17.6 without (f32 gained nothing; load ~4).
constexpr int kPrefetchRows = 48;
#if defined(__AVX512F__)
constexpr int kRowTile = 12;
constexpr int kAccumulators = 24;  // of 32 vector registers
#else
constexpr int kRowTile = 6;
constexpr int kAccumulators = 12;  // of 16
#endif

struct F32 {
  using T = float;
  static constexpr bool kPrefetch = false;
  static void Load2(const float* p, V& b0, V& b1) {
    b0 = Load(p);
    b1 = Load(p + kWidth);
  }
};

struct Bf16 {
  using T = uint16_t;
  static constexpr bool kPrefetch = true;
  // A panel row holds column j at 2j and column kWidth + j at 2j + 1 (kernels.h): the low
  // halves of the 32-bit lanes are columns [0, kWidth), the high halves the rest.
  static void Load2(const uint16_t* p, V& b0, V& b1) {
#if defined(__AVX512F__)
    const __m512i raw = _mm512_loadu_si512(p);
    b0 = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    b1 = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(-65536)));
#else
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    b0 = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    b1 = _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(-65536)));
#endif
  }
};

// Rows [0, M) of a row tile of x (packed: a[kk][r] = x[r][kk], kRowTile floats per kk)
// against one panel; `cols` valid output columns (≤ kPanel). With few rows, two FMAs per k
// would wait on each other's latency (4 cycles) and leave the loads idle, so S interleaved
// steps of k keep S independent chains per accumulator, summed at the end.
// x packed as a tile of XS rows: kRowTile, or 1 for a decode's row gathered dense (GemmOf).
template <class W, int M, int XS = kRowTile>
void Tile(const float* __restrict a, const typename W::T* __restrict panel, int k,
          const float* bias, bool accumulate, float* __restrict y, int ldy, int cols) {
  constexpr int S = 4 * M <= kAccumulators ? 2 * (8 * M <= kAccumulators ? 2 : 1) : 1;
  V c0[S][M], c1[S][M];
#pragma GCC unroll 16
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) c0[s][r] = c1[s][r] = Zero();
  }
  int kk = 0;
  for (; kk + S <= k; kk += S) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      V b0, b1;
      if constexpr (W::kPrefetch && M <= 2) {
        _mm_prefetch(reinterpret_cast<const char*>(panel + (kk + s + kPrefetchRows) * kPanel),
                     _MM_HINT_T0);
      }
      W::Load2(panel + (kk + s) * kPanel, b0, b1);
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        const V ar = Set1(a[(kk + s) * XS + r]);
        c0[s][r] = Fma(ar, b0, c0[s][r]);
        c1[s][r] = Fma(ar, b1, c1[s][r]);
      }
    }
  }
  for (; kk < k; ++kk) {
    V b0, b1;
    W::Load2(panel + kk * kPanel, b0, b1);
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const V ar = Set1(a[kk * XS + r]);
      c0[0][r] = Fma(ar, b0, c0[0][r]);
      c1[0][r] = Fma(ar, b1, c1[0][r]);
    }
  }
#pragma GCC unroll 4
  for (int s = 1; s < S; ++s) {
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      c0[0][r] = Add(c0[0][r], c0[s][r]);
      c1[0][r] = Add(c1[0][r], c1[s][r]);
    }
  }
  StoreTile<M>(c0[0], c1[0], bias, accumulate, y, ldy, cols);
}

template <class W>
using TileFn = void (*)(const float*, const typename W::T*, int, const float*, bool, float*, int,
                        int);

template <class W, int... M>
struct TileTable {
  static constexpr TileFn<W> kFns[] = {nullptr, &Tile<W, M>...};
};

#if defined(__AVX512F__)
template <class W>
constexpr const TileFn<W>* kTiles = TileTable<W, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12>::kFns;
#else
template <class W>
constexpr const TileFn<W>* kTiles = TileTable<W, 1, 2, 3, 4, 5, 6>::kFns;
#endif

template <class W>
void GemmOf(const float* packed_x, int rows, const typename W::T* packed, const PackedShape& shape,
            int panel_begin, int panel_end, const float* bias, bool accumulate, float* y, int ldy) {
  const size_t panel_elements = static_cast<size_t>(shape.k_padded) * kPanel;
  if (rows == 1) {
    // One row reads x dense: in a packed tile its floats are kRowTile apart, and for k = 5632 the
    // 270 KB they span, evicted by each 720 KB panel, came back from L3 for every panel (0.57 of
    // the roof against 0.8 for k = 2048).
    auto* row = static_cast<float*>(KernelScratch(sizeof(float) * shape.k));
    for (int kk = 0; kk < shape.k; ++kk) row[kk] = packed_x[kk * kRowTile];
    for (int p = panel_begin; p < panel_end; ++p) {
      const int col = p * kPanel;
      Tile<W, 1, 1>(row, packed + p * panel_elements, shape.k, bias ? bias + col : nullptr,
                    accumulate, y + col, ldy, MinInt(kPanel, shape.n - col));
    }
    return;
  }
  for (int p = panel_begin; p < panel_end; ++p) {
    const typename W::T* panel = packed + p * panel_elements;
    const int col = p * kPanel;
    const int cols = MinInt(kPanel, shape.n - col);
    const float* panel_bias = bias ? bias + col : nullptr;
    // Blocks of kKBlock along k keep a tile's rows of x (12 x 256 floats) in L1 and the
    // panel's block (256 x 32) in L2 while every row tile passes over it. The first block
    // adds the bias (and y, if accumulating); later ones add to what it stored. One row tile
    // has nothing to share, so it takes k whole.
    const int k_block = rows <= kRowTile ? shape.k : kKBlock;
    for (int k0 = 0; k0 < shape.k; k0 += k_block) {
      const int kc = MinInt(k_block, shape.k - k0);
      for (int r = 0; r < rows; r += kRowTile) {
        const int m = MinInt(kRowTile, rows - r);
        kTiles<W>[m](packed_x + static_cast<size_t>(r) * shape.k + k0 * kRowTile,
                     panel + k0 * kPanel, kc, k0 == 0 ? panel_bias : nullptr,
                     k0 == 0 ? accumulate : true, y + static_cast<size_t>(r) * ldy + col, ldy,
                     cols);
      }
    }
  }
}

}  // namespace

void PackRows(const float* x, int rows, int k, int tile_begin, int tile_end, float* packed) {
  for (int t = tile_begin; t < tile_end; ++t) {
    const int r0 = t * kRowTile, m = MinInt(kRowTile, rows - r0);
    float* dst = packed + static_cast<size_t>(t) * kRowTile * k;
    for (int r = 0; r < m; ++r) {
      const float* src = x + static_cast<size_t>(r0 + r) * k;
      for (int kk = 0; kk < k; ++kk) dst[kk * kRowTile + r] = src[kk];
    }
  }
}

void GemmF32(const float* packed_x, int rows, const float* packed, const PackedShape& shape,
             int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
             int ldy) {
  GemmOf<F32>(packed_x, rows, packed, shape, panel_begin, panel_end, bias, accumulate, y, ldy);
}

void GemmBf16(const float* packed_x, int rows, const uint16_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy) {
  GemmOf<Bf16>(packed_x, rows, packed, shape, panel_begin, panel_end, bias, accumulate, y, ldy);
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
