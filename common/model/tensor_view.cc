#include "common/model/tensor_view.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/numeric.h"

namespace pagoda {

size_t GgmlRowBytes(GgmlType type, int64_t cols) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(type));
  return static_cast<size_t>(cols / info.block_values) * info.block_bytes;
}

size_t TensorView::row_bytes() const { return GgmlRowBytes(type, cols); }

void DequantizeRows(const TensorView& view, int64_t row_begin, int64_t num_rows, float* out) {
  // The float types without the per-block dispatch: a load converts billions of them.
  const uint8_t* p = view.row(row_begin);
  const int64_t n = num_rows * view.cols;
  switch (view.type) {
    case GgmlType::kF32:
      std::memcpy(out, p, n * sizeof(float));
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      const bool f16 = view.type == GgmlType::kF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16 ? HalfToFloat(h) : Bf16ToFloat(h);
      }
      return;
    }
    default:
      break;
  }
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(view.type));
  DequantizeGgml(view.type, view.row(row_begin), num_rows * view.cols / info.block_values, out);
}

void ReleaseMappedPages(const TensorView& view) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(view.data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + view.num_bytes()) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace pagoda
