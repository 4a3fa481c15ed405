#include "worker/q6k_pack.h"

#include <algorithm>
#include <cstring>

#include "common/numeric.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr int kBlock = PackedShape::kInt8Block;
constexpr int kBlocks = PackedShape::kQ4KBlocks;  // blocks of 32 in a superblock of 256
constexpr int kValues = 256, kBytes = 210;        // a Q6_K block of the file

// q ∈ [0, 63] of value v (0..255) of a file's Q6_K block (ql[128] | qh[64] | sc[16] | f16 d), as
// llama.cpp's dequantize_row_q6_K reads it; its scale is sc[v / 16].
int Q6KValue(const uint8_t* block, int v) {
  const int half = v / 128, quarter = v % 128 / 32, l = v % 32;
  const uint8_t low = block[64 * half + 32 * (quarter % 2) + l] >> (4 * (quarter / 2));
  const uint8_t high = block[128 + 32 * half + l] >> (2 * quarter);
  return (low & 0xF) | (high & 3) << 4;
}

// Where q of column j and k i (0..31) of a block lives in the panel's block (kernels.h): its
// low 4 bits at `nibble` (shifted by nibble_shift), its high 2 bits at `high` (by high_shift).
struct BitsAt {
  size_t nibble, high;
  int nibble_shift, high_shift;
};
BitsAt Bits(int panel_width, int j, int i) {
  const int half = panel_width / 2, group = i / 4;
  const size_t at = static_cast<size_t>((j % half) * 4 + i % 4);
  const bool second = j >= half;
  return {.nibble = group * 2 * panel_width + at,
          .high = 16 * panel_width + (group / 2) * 2 * panel_width + at,
          .nibble_shift = second ? 4 : 0,
          .high_shift = (group % 2 == 0 ? 4 : 0) + (second ? 2 : 0)};
}

// The file's row of output column `column` of the stacked parts.
const uint8_t* SourceRow(std::span<const TensorView> parts, int64_t column) {
  for (const TensorView& part : parts) {
    if (column < part.rows) return part.row(column);
    column -= part.rows;
  }
  LOG(FATAL) << "column past the parts' rows";
}

}  // namespace

bool CanPackQ6K(std::span<const TensorView> parts) {
  return !parts.empty() && std::all_of(parts.begin(), parts.end(), [&](const TensorView& p) {
    return p.type == GgmlType::kQ6_K && p.cols == parts[0].cols;
  });
}

PackedShape Q6KShape(std::span<const TensorView> parts, int panel_width) {
  CHECK(CanPackQ6K(parts)) << "q6_k packs only Q6_K parts of one width";
  int64_t rows = 0;
  for (const TensorView& p : parts) rows += p.rows;
  // Q6_K rows are whole blocks of 256 (tensor_view.h), so k_padded = k.
  CHECK_EQ(parts[0].cols % kValues, 0);
  return {.k = static_cast<int>(parts[0].cols),
          .n = static_cast<int>(rows),
          .panel_width = panel_width,
          .k_padded = static_cast<int>(parts[0].cols),
          .dtype = WeightDtype::kQ6K};
}

void PackQ6KPanel(std::span<const TensorView> parts, const PackedShape& shape, int panel_index,
                  uint8_t* panel) {
  const int pw = shape.panel_width;
  std::memset(panel, 0, shape.panel_bytes());
  const int cols = std::min(pw, shape.n - panel_index * pw);
  for (int j = 0; j < cols; ++j) {
    const uint8_t* row = SourceRow(parts, static_cast<int64_t>(panel_index) * pw + j);
    for (int b = 0; b < shape.num_int8_blocks(); ++b) {
      const uint8_t* src = row + (b / kBlocks) * kBytes;
      uint8_t* block = panel + shape.q6k_block_offset(b);
      if (b % kBlocks == 0) {
        std::memcpy(block - shape.q6k_header_bytes() + 2 * j, src + 208, 2);  // f16 d
      }
      for (int i = 0; i < kBlock; ++i) {
        const int v = (b % kBlocks) * kBlock + i, q = Q6KValue(src, v);
        const BitsAt at = Bits(pw, j, i);
        block[at.nibble] |= static_cast<uint8_t>((q & 0xF) << at.nibble_shift);
        block[at.high] |= static_cast<uint8_t>((q >> 4) << at.high_shift);
      }
      for (int h = 0; h < 2; ++h) block[24 * pw + h * pw + j] = src[192 + 2 * (b % kBlocks) + h];
    }
  }
}

void Q6KRow(const uint8_t* packed, const PackedShape& shape, int i, float* out) {
  const int pw = shape.panel_width, j = i % pw;
  const uint8_t* panel = packed + (i / pw) * shape.panel_bytes();
  for (int b = 0; b < shape.num_int8_blocks(); ++b) {
    const uint8_t* block = panel + shape.q6k_block_offset(b);
    uint16_t half;
    std::memcpy(&half,
                panel + shape.q6k_block_offset(b - b % kBlocks) - shape.q6k_header_bytes() + 2 * j,
                2);
    const float d = HalfToFloat(half);
    for (int kk = 0; kk < kBlock; ++kk) {
      const BitsAt at = Bits(pw, j, kk);
      const int q = ((block[at.nibble] >> at.nibble_shift) & 0xF) |
                    ((block[at.high] >> at.high_shift) & 3) << 4;
      const int8_t sc = static_cast<int8_t>(block[24 * pw + (kk / 16) * pw + j]);
      // As DequantizeGgml: d · sc, then · (q − 32), in f32 (both products exact).
      out[b * kBlock + kk] = d * sc * (q - 32);
    }
  }
}

}  // namespace pagoda
