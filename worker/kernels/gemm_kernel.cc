// The GEMM of Linear for one ISA: y (rows, n) = x (rows, k) · Wᵀ [+ bias] [+ y], W packed in
// panels (kernels.h). For each panel, row blocks of kRowTile rows keep a (kRowTile, 2 vectors)
// tile of y in registers while the panel streams past once:
//
//   for kk < k:   b0 b1 = panel[kk][0 : 2·kWidth]          (two vector loads)
//                 for r < kRowTile:  a = broadcast x[r][kk];  c[r] += a·b0, a·b1
//
// x is first packed by row tiles (PackRows): the broadcasts of a tile then read one sequential
// stream, where rows k floats apart (8 KB for k = 2048) would fight over the same L1 sets.
// AVX-512: 12 rows x 32 columns (24 accumulators of 32 registers); AVX2: 6 x 16 (12 of 16).
// The panel (k_padded x 32 floats, ≤ 720 KB for k = 5632) stays in L2 across the row blocks,
// so each weight is read from memory once per call whatever the row count.
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

constexpr int kPanel = 2 * kWidth;
#ifndef PAGODA_GEMM_KBLOCK
#define PAGODA_GEMM_KBLOCK 256
#endif
constexpr int kKBlock = PAGODA_GEMM_KBLOCK;
#if defined(__AVX512F__)
constexpr int kRowTile = 12;
constexpr int kAccumulators = 24;  // of 32 vector registers
#else
constexpr int kRowTile = 6;
constexpr int kAccumulators = 12;  // of 16
#endif

// Rows [0, M) of a row tile of x (packed: a[kk][r] = x[r][kk], kRowTile floats per kk)
// against one panel; `cols` valid output columns (≤ kPanel). With few rows, two FMAs per k
// would wait on each other's latency (4 cycles) and leave the loads idle, so S interleaved
// steps of k keep S independent chains per accumulator, summed at the end.
template <int M>
void Tile(const float* __restrict a, const float* __restrict panel, int k, const float* bias,
          bool accumulate, float* __restrict y, int ldy, int cols) {
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
      const V b0 = Load(panel + (kk + s) * kPanel);
      const V b1 = Load(panel + (kk + s) * kPanel + kWidth);
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        const V ar = Set1(a[(kk + s) * kRowTile + r]);
        c0[s][r] = Fma(ar, b0, c0[s][r]);
        c1[s][r] = Fma(ar, b1, c1[s][r]);
      }
    }
  }
  for (; kk < k; ++kk) {
    const V b0 = Load(panel + kk * kPanel);
    const V b1 = Load(panel + kk * kPanel + kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      const V ar = Set1(a[kk * kRowTile + r]);
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
  if (cols == kPanel) {
    const V bias0 = bias ? Load(bias) : Zero(), bias1 = bias ? Load(bias + kWidth) : Zero();
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      float* dst = y + r * ldy;
      V v0 = Add(c0[0][r], bias0), v1 = Add(c1[0][r], bias1);
      if (accumulate) {
        v0 = Add(v0, Load(dst));
        v1 = Add(v1, Load(dst + kWidth));
      }
      Store(dst, v0);
      Store(dst + kWidth, v1);
    }
    return;
  }
  // The last panel of a matrix whose n is not a multiple of kPanel.
  alignas(64) float row[kPanel];
  for (int r = 0; r < M; ++r) {
    Store(row, c0[0][r]);
    Store(row + kWidth, c1[0][r]);
    float* dst = y + r * ldy;
    for (int j = 0; j < cols; ++j) {
      const float v = row[j] + (bias ? bias[j] : 0.0f);
      dst[j] = accumulate ? dst[j] + v : v;
    }
  }
}

using TileFn = void (*)(const float*, const float*, int, const float*, bool, float*, int, int);

template <int... M>
struct TileTable {
  static constexpr TileFn kFns[] = {nullptr, &Tile<M>...};
};

#if defined(__AVX512F__)
constexpr const TileFn* kTiles = TileTable<1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12>::kFns;
#else
constexpr const TileFn* kTiles = TileTable<1, 2, 3, 4, 5, 6>::kFns;
#endif

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

void Gemm(const float* packed_x, int rows, const float* packed, const PackedShape& shape,
          int panel_begin, int panel_end, const float* bias, bool accumulate, float* y) {
  for (int p = panel_begin; p < panel_end; ++p) {
    const float* panel = packed + p * shape.panel_floats();
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
        kTiles[m](packed_x + static_cast<size_t>(r) * shape.k + k0 * kRowTile, panel + k0 * kPanel,
                  kc, k0 == 0 ? panel_bias : nullptr, k0 == 0 ? accumulate : true,
                  y + static_cast<size_t>(r) * shape.n + col, shape.n, cols);
      }
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
