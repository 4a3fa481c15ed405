// What the GEMM kernels of one ISA share (kernel sources only, like vec.h): the panel width
// and the store of a finished register tile.
#ifndef PAGODA_WORKER_KERNELS_GEMM_TILE_H_
#define PAGODA_WORKER_KERNELS_GEMM_TILE_H_

#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {

constexpr int kPanel = 2 * kWidth;  // output columns of a panel: two vectors
// Rows of a register tile of the int8 and int4 GEMMs, and of QuantizeRows' tiles.
#if defined(__AVX512F__)
constexpr int kInt8RowTile = 6;
#else
constexpr int kInt8RowTile = 2;
#endif

// y[r][0 : cols] (= or +=) c0[r] | c1[r] + bias, for the M rows of a tile; cols ≤ kPanel.
template <int M>
inline void StoreTile(const V (&c0)[M], const V (&c1)[M], const float* bias, bool accumulate,
                      float* __restrict y, int ldy, int cols) {
  if (cols == kPanel) {
    const V bias0 = bias ? Load(bias) : Zero(), bias1 = bias ? Load(bias + kWidth) : Zero();
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      float* dst = y + r * ldy;
      V v0 = Add(c0[r], bias0), v1 = Add(c1[r], bias1);
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
    Store(row, c0[r]);
    Store(row + kWidth, c1[r]);
    float* dst = y + r * ldy;
    for (int j = 0; j < cols; ++j) {
      const float v = row[j] + (bias ? bias[j] : 0.0f);
      dst[j] = accumulate ? dst[j] + v : v;
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_GEMM_TILE_H_
