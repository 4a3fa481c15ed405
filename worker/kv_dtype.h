// The element type of the KV pool (KvDtype, named in common/dtype_names.h): its size and the
// vectorized conversion into it. Kernel sources include this header (through
// worker/kernels/kernels.h), so it holds only types and declarations: no inline function that
// an AVX-512 object could emit. The scalar f32 ↔ bf16/f16 conversions are common/numeric.h's.
#ifndef PAGODA_WORKER_KV_DTYPE_H_
#define PAGODA_WORKER_KV_DTYPE_H_

#include <cstdint>

#include "common/dtype_names.h"

namespace pagoda {

int KvDtypeBytes(KvDtype dtype);  // 4 or 2

// One layer of the pool: K and V, each [num_blocks, num_kv_heads, block_size, head_dim] of
// `dtype`. Not owned.
struct KvLayerView {
  const void* k = nullptr;
  const void* v = nullptr;
  KvDtype dtype = KvDtype::kF32;
};

// Converts n floats into `dtype` elements at dst (n·KvDtypeBytes(dtype) bytes), rounding to
// nearest even; a NaN stays a NaN. Vectorized: it runs for every K/V row a step writes.
void ConvertFromFloat(const float* src, int n, KvDtype dtype, void* dst);

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_DTYPE_H_
