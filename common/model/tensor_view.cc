#include "common/model/tensor_view.h"

namespace pagoda {

size_t GgmlRowBytes(GgmlType type, int64_t cols) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(type));
  return static_cast<size_t>(cols / info.block_values) * info.block_bytes;
}

size_t TensorView::row_bytes() const { return GgmlRowBytes(type, cols); }

void DequantizeRows(const TensorView& view, int64_t row_begin, int64_t num_rows, float* out) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(view.type));
  DequantizeGgml(view.type, view.row(row_begin), num_rows * view.cols / info.block_values, out);
}

}  // namespace pagoda
