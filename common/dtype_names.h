// The element types a worker stores its weights and its KV cache in, and their names: the one
// vocabulary of the worker's --weight-dtype and --kv-cache-dtype, the router's --worker-*-dtype
// and `pagoda run` (common/dtype_flags.h parses them). Kernel sources include this header
// (through worker/kernels/kernels.h), so it holds only types and declarations.
#ifndef PAGODA_COMMON_DTYPE_NAMES_H_
#define PAGODA_COMMON_DTYPE_NAMES_H_

#include <cstdint>

namespace pagoda {

// How Linear stores a weight matrix (worker/linear.h). kQ6K is no --weight-dtype: it is what
// `auto` keeps a Q6_K tensor of a GGUF file as (its blocks exactly, worker/q6k_pack.h).
enum class WeightDtype { kF32, kBf16, kInt8, kInt4, kQ6K };

// What a Linear multiplies bf16 weights in (worker/linear.h): f32 (the weights widened, as on
// every CPU), bf16 (the activations rounded to bf16 as well, products summed in f32: AVX512_BF16's
// vdpbf16ps, where the CPU has it), or auto (bf16 where the CPU has it).
enum class ComputeDtype { kAuto, kF32, kBf16 };

// K and V are stored in this type and always accumulated in f32.
enum class KvDtype : int32_t {
  kF32 = 0,
  kBf16 = 1,  // f32's range, 8 significant bits: no overflow, coarser values
  kF16 = 2,   // 11 significant bits, but |x| ≥ 65520 becomes inf
  kInt8 = 3,  // per (token, KV head) row: q ∈ [−127, 127] and an f16 scale absmax/127
};

const char* WeightDtypeName(WeightDtype dtype);    // "f32", "bf16", "int8", "int4", "q6_k"
const char* KvDtypeName(KvDtype dtype);            // "f32", "bf16", "f16", "int8"
const char* ComputeDtypeName(ComputeDtype dtype);  // "auto", "f32", "bf16"

// Bytes of one K (or V) row of `head_dim` elements in the KV pool, its scale included: 4 and 2
// per element, and int8's head_dim + 2 (one byte each and an f16 scale). A block of the pool is
// block_size of them per KV head and layer (worker/kv_pool.h has the layout).
int KvRowBytes(KvDtype dtype, int head_dim);

}  // namespace pagoda

#endif  // PAGODA_COMMON_DTYPE_NAMES_H_
