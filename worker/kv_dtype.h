// The element type of the KV pool (KvDtype, named in common/dtype_names.h): the layout of its
// rows and the vectorized conversion into it. Kernel sources include this header (through
// worker/kernels/kernels.h), so it holds only types and declarations: no inline function that
// an AVX-512 object could emit. The scalar f32 ↔ bf16/f16 conversions are common/numeric.h's.
//
// One (block, KV head) run of the pool holds block_size rows, KvRowBytes(dtype, head_dim) each:
//   f32, bf16, f16: [block_size][head_dim] elements
//   int8:           [block_size][head_dim] int8 q, then [block_size] f16 scales; R·x ≈ q · scale
//                   (R a fixed rotation: RotateToInt8Basis)
// so a block's bytes carry their scales: copying, sending or comparing a block needs no more.
#ifndef PAGODA_WORKER_KV_DTYPE_H_
#define PAGODA_WORKER_KV_DTYPE_H_

#include <cstdint>

#include "common/dtype_names.h"

namespace pagoda {

// One layer of the pool: K and V, each [num_blocks, num_kv_heads] runs of `dtype` as above.
// Not owned.
struct KvLayerView {
  const void* k = nullptr;
  const void* v = nullptr;
  KvDtype dtype = KvDtype::kF32;
};

// Converts n floats into `dtype` elements at dst (n · 4 or 2 bytes), rounding to nearest even;
// a NaN stays a NaN. Vectorized: it runs for every K/V row a step writes.
// REQUIRES: dtype is f32, bf16 or f16 (int8 has a scale per row: WriteKvRow).
void ConvertFromFloat(const float* src, int n, KvDtype dtype, void* dst);

// Writes row `offset` of the run at `run` (block_size rows of head_dim, laid out as above) from
// head_dim floats. int8 rotates the row (RotateToInt8Basis), then quantizes symmetrically: scale =
// max|x| / 127 rounded to f16, then q = x / scale rounded to nearest even and clamped to ±127; a
// row holding a NaN or an infinity, or whose scale overflows f16 (max|x| ≥ ~8.3e6), gets a NaN
// scale: it reads back as NaNs.
void WriteKvRow(const float* src, int head_dim, KvDtype dtype, int block_size, int offset,
                void* run);
// The basis an int8 row is stored in: R·x, with R = H·D / √g on each group of g consecutive
// elements, g the largest power of two that divides head_dim, H the g×g Walsh–Hadamard matrix
// and D a fixed diagonal of signs. R is orthogonal, so (R·k)·(R·q) = k·q and Σ_j p_j·(R·v_j) =
// R·Σ_j p_j·v_j: attention over an int8 cache rotates q on the way in and its output back on
// the way out, and the kernels read the stored rows as they are. A row's large elements (a K
// channel that is large for every token) spread over the group, so its absmax scale also fits
// the small ones: on stories260K the rotation cuts the int8 cache's KL to the f32 cache's 2.4×.
void RotateToInt8Basis(float* x, int head_dim);    // x = R·x
void RotateFromInt8Basis(float* x, int head_dim);  // x = Rᵀ·x

// The name of the pool's row layout, which a block's bytes are only meaningful under: the
// dtype's name, with the basis for int8 ("int8-hadamard"). KV transfers and the disk cache
// match on it, so blocks of an older int8 layout are never read as this one.
const char* KvLayoutName(KvDtype dtype);

// Row `offset` of the run as floats (what attention computes with, rotated back for int8), for
// tests and tools.
void ReadKvRow(const void* run, int head_dim, KvDtype dtype, int block_size, int offset,
               float* dst);

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_DTYPE_H_
