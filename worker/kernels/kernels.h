// The hand-written kernels, one table per ISA. Each table is built from the same sources
// compiled for that ISA (worker/CMakeLists.txt); worker/kernels/isa.h picks one at start.
// Kernels are single-threaded: callers split the work between OpenMP threads.
#ifndef PAGODA_WORKER_KERNELS_KERNELS_H_
#define PAGODA_WORKER_KERNELS_KERNELS_H_

#include <cstddef>

#include "worker/kv_dtype.h"

namespace pagoda {

// A weight matrix W (n, k) packed for the GEMM kernel: panels of `panel_width` output columns,
// each (k_padded, panel_width) row-major, zero beyond k and n:
//   packed[p][kk][j] = W[p·panel_width + j][kk]
// This is oneDNN's BA16a{panel_width}b layout of the (k, n) matrix Wᵀ, so a oneDNN matmul can
// read the same buffer.
struct PackedShape {
  int k = 0, n = 0;
  int panel_width = 0;  // output columns per panel
  int k_padded = 0;     // k rounded up to 16
  int num_panels() const { return (n + panel_width - 1) / panel_width; }
  size_t panel_floats() const { return static_cast<size_t>(k_padded) * panel_width; }
  size_t num_floats() const { return panel_floats() * num_panels(); }
};

// One step of paged attention for a tile (paged_attention.cc describes the work split).
struct AttentionTile {
  int num_heads, num_kv_heads, head_dim, block_size;
  int start_pos;             // the sequence's tokens already cached
  int row_begin, row_end;    // query rows of the sequence, [begin, end)
  int head_begin, head_end;  // KV heads, [begin, end)
  const int* block_table;
  const float* q;  // row r of the sequence at q + r·q_stride
  int q_stride;
  const void* k_pool;  // [num_blocks, num_kv_heads, block_size, head_dim] of kv_dtype
  const void* v_pool;
  float* out;      // row r at out + r·num_heads·head_dim
  float* scratch;  // AttentionScratchFloats(...) floats
  KvDtype kv_dtype = KvDtype::kF32;
};

struct Kernels {
  const char* name;  // "avx2", "avx512"
  int panel_width;   // of PackedShape, for this ISA's GEMM tile
  int row_tile;      // rows of x per GEMM register tile
  // Packs row tiles [tile_begin, tile_end) of x (rows, k) for gemm: tile t at
  // packed + t·row_tile·k, as packed[kk][r] = x[t·row_tile + r][kk].
  // `packed` holds row_tiles(rows)·row_tile·k floats.
  void (*pack_rows)(const float* x, int rows, int k, int tile_begin, int tile_end, float* packed);
  // y (rows, n) = x (rows, k) · Wᵀ [+ bias] [+ y] for output panels [panel_begin, panel_end),
  // x packed by pack_rows.
  void (*gemm)(const float* packed_x, int rows, const float* packed, const PackedShape& shape,
               int panel_begin, int panel_end, const float* bias, bool accumulate, float* y);
  int row_tiles(int rows) const { return (rows + row_tile - 1) / row_tile; }
  // out = w ⊙ x / sqrt(mean(x²) + eps); out may be x.
  void (*rms_norm)(const float* x, const float* w, int n, float eps, float* out);
  // h = SiLU(gate) · up.
  void (*swiglu)(const float* gate, const float* up, int n, float* h);
  void (*attention)(const AttentionTile& tile);
};

// Floats of scratch an AttentionTile needs.
inline size_t AttentionScratchFloats(int rows, int query_heads, int head_dim, int block_size) {
  return static_cast<size_t>(rows) * query_heads * (head_dim + 2) + block_size;
}

namespace avx2 {
const Kernels& GetKernels();
}
namespace avx512 {
const Kernels& GetKernels();
}

}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_KERNELS_H_
