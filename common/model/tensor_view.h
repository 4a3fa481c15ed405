// A 2-D weight tensor as its file stores it, borrowed: `rows` rows of `cols` values of ggml
// type `type`, row-major, each row GgmlRowBytes(type, cols) bytes (a whole number of blocks).
// Every format maps onto it: a GGUF tensor as it is, a safetensors F32/F16/BF16 tensor as the
// same ggml type, a llama2.c checkpoint as F32. The worker packs its matrices from views, so a
// quantized tensor reaches the kernels' layout without being widened to f32 first.
#ifndef PAGODA_COMMON_MODEL_TENSOR_VIEW_H_
#define PAGODA_COMMON_MODEL_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>

#include "common/model/ggml_quant.h"

namespace pagoda {

struct TensorView {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;

  size_t row_bytes() const;  // GgmlRowBytes(type, cols)
  size_t num_bytes() const { return rows * row_bytes(); }
  const uint8_t* row(int64_t r) const { return data + r * row_bytes(); }
};

// Bytes of one row of `cols` values of `type`. REQUIRES: cols is a multiple of the type's
// block_values (a file whose rows are not is refused when it is opened).
size_t GgmlRowBytes(GgmlType type, int64_t cols);

// Rows [row_begin, row_begin + num_rows) of `view` as float32 into `out` (num_rows · cols),
// exactly as llama.cpp's dequantize_row_* gives them.
void DequantizeRows(const TensorView& view, int64_t row_begin, int64_t num_rows, float* out);

// The bytes of `view` are done with: where they are pages of a mapped file, the kernel may
// drop them (madvise MADV_DONTNEED on the whole pages inside the range), so a model loaded
// tensor by tensor does not keep the file resident. A later read maps them in again.
// REQUIRES: the view is of a read-only file mapping (MAP_PRIVATE, never written).
void ReleaseMappedPages(const TensorView& view);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_TENSOR_VIEW_H_
