// What the GEMM kernels of one ISA share (kernel sources only, like vec.h): the panel width,
// the store of a finished register tile, and the panel loop of the quantized GEMMs.
#ifndef PAGODA_WORKER_KERNELS_GEMM_TILE_H_
#define PAGODA_WORKER_KERNELS_GEMM_TILE_H_

#include <cstring>

#include "worker/kernels/kernels.h"
#include "worker/kernels/scratch.h"
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
// Rows of a register tile of the bf16-compute GEMM (AVX-512 only), and of PackRowsBf16's tiles.
constexpr int kBf16RowTile = 6;

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

// A register tile of a quantized GEMM over one panel: (x at its first row, panel, blocks of 32
// along k, bias, accumulate, y at its first row and column, ldy, columns of the panel).
using QuantizedTileFn = void (*)(const uint8_t*, const uint8_t*, int, const float*, bool, float*,
                                 int, int);

// Bytes of a block of 32 k of x in a QuantizeRows tile of `tile_rows` rows: the int8 values
// in groups of 4 k (4 bytes a row each), then a float scale and an int32 offset a row.
constexpr size_t XBlockBytes(int tile_rows) { return static_cast<size_t>(40) * tile_rows; }

// Row 0 of a QuantizeRows tile, gathered into the layout of a tile of one row (blocks of 40
// bytes). A decode's tile reads 40 bytes of x per block so, not the 4 cache lines its words
// span in a tile of kInt8RowTile rows: those lines, missed in L1 as the panel streams past,
// took L1 miss buffers from the weights' stream.
inline void GatherRow(const uint8_t* __restrict tile, int num_blocks, uint8_t* __restrict row) {
  for (int b = 0; b < num_blocks; ++b) {
    const uint8_t* src = tile + b * XBlockBytes(kInt8RowTile);
    uint8_t* dst = row + b * XBlockBytes(1);
    for (int g = 0; g < 10; ++g) std::memcpy(dst + 4 * g, src + 4 * kInt8RowTile * g, 4);
  }
}

// Panels [panel_begin, panel_end) of a quantized GEMM (int8, int4, q6_k): x as QuantizeRows
// wrote it (tiles of kInt8RowTile rows), register tiles of up to `tile_rows` rows
// (`tiles[m]` runs m rows; tile_rows divides kInt8RowTile). Each panel stays in L2 across
// the row tiles. One row (a decode) is gathered dense first and runs `one_row`, a tile of one
// row whose x is laid out as a QuantizeRows tile of one row.
inline void RunQuantizedPanels(const QuantizedTileFn* tiles, QuantizedTileFn one_row, int tile_rows,
                               const uint8_t* packed_x, int rows, const uint8_t* packed,
                               const PackedShape& shape, int panel_begin, int panel_end,
                               const float* bias, bool accumulate, float* y, int ldy) {
  const int num_blocks = shape.num_int8_blocks();
  const size_t tile_bytes = Int8TileBytes(kInt8RowTile, shape.k_padded);
  if (rows == 1) {
    auto* row = static_cast<uint8_t*>(KernelScratch(num_blocks * XBlockBytes(1)));
    GatherRow(packed_x, num_blocks, row);
    for (int p = panel_begin; p < panel_end; ++p) {
      const int col = p * kPanel;
      one_row(row, packed + p * shape.panel_bytes(), num_blocks, bias ? bias + col : nullptr,
              accumulate, y + col, ldy, MinInt(kPanel, shape.n - col));
    }
    return;
  }
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = packed + p * shape.panel_bytes();
    const int col = p * kPanel;
    const int cols = MinInt(kPanel, shape.n - col);
    const float* panel_bias = bias ? bias + col : nullptr;
    for (int r = 0; r < rows; r += tile_rows) {
      const int m = MinInt(tile_rows, rows - r);
      // Row r is word r % kInt8RowTile of its QuantizeRows tile's 4-byte groups.
      tiles[m](packed_x + (r / kInt8RowTile) * tile_bytes + 4 * (r % kInt8RowTile), panel,
               num_blocks, panel_bias, accumulate, y + static_cast<size_t>(r) * ldy + col, ldy,
               cols);
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_GEMM_TILE_H_
