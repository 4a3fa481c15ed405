// ggml's tensor types as GGUF files store them (llama.cpp's ggml-common.h), and their decoding
// to float32, apart from the file format so that the worker can use the block layouts without
// the GGUF parser. Every type is a sequence of blocks of `block_values` values in
// `block_bytes` bytes; the float types are blocks of one value.
//
//   Q4_0  (32 values, 18 bytes)   f16 d | 16 bytes: low nibbles are values 0..15, high 16..31;
//                                  value = (nibble - 8) * d
//   Q8_0  (32 values, 34 bytes)   f16 d | int8 qs[32]; value = q * d
//   Q4_K  (256 values, 144 bytes) f16 d | f16 dmin | scales[12] (6-bit scale and min of eight
//                                  sub-blocks of 32) | qs[128] (nibbles)
//   Q6_K  (256 values, 210 bytes) ql[128] (low 4 bits) | qh[64] (high 2 bits) |
//                                  int8 scales[16] | f16 d
//
// Thread-safe: pure functions.
#ifndef PAGODA_COMMON_MODEL_GGML_QUANT_H_
#define PAGODA_COMMON_MODEL_GGML_QUANT_H_

#include <cstdint>

namespace pagoda {

// The ggml tensor types Pagoda reads, with ggml's numbers.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;  // as llama.cpp prints it: "Q8_0"
  int block_values;
  int block_bytes;
};

// The type numbered `type` in a file; nullptr when it is not one of GgmlType's.
const GgmlTypeInfo* FindGgmlType(uint32_t type);

// Decodes `num_blocks` consecutive blocks of `type` at `blocks` into `out`
// (num_blocks * block_values floats), exactly as llama.cpp's dequantize_row_* does.
void DequantizeGgml(GgmlType type, const uint8_t* blocks, int64_t num_blocks, float* out);

// Q4_K's 6-bit scale and min of sub-block j (0..7, 32 values each) from the block's 12 packed
// scale bytes (llama.cpp's get_scale_min_k4): sub-block j's values are d·scale·q − dmin·min.
void Q4KScaleMin(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_GGML_QUANT_H_
