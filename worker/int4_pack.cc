#include "worker/int4_pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/model/ggml_quant.h"
#include "common/numeric.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr int kBlock = PackedShape::kInt8Block;
constexpr int kQ4_0Bytes = 18, kQ4KBytes = 144, kQ4KValues = 256;

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Where q of column j (of the panel) and k kk % 32 lives in its block's nibbles (kernels.h).
struct NibbleAt {
  size_t byte;
  int shift;  // 0: low nibble, 4: high
};
NibbleAt Nibble(int panel_width, int j, int kk) {
  const int half = panel_width / 2;
  return {static_cast<size_t>((kk / 4) * 2 * panel_width + (j % half) * 4 + kk % 4),
          j < half ? 0 : 4};
}

// The source of one output column: row `row` of `part`.
struct Source {
  const TensorView* part;
  int64_t row;
};
Source Locate(std::span<const TensorView> parts, int64_t column) {
  for (const TensorView& part : parts) {
    if (column < part.rows) return {&part, column};
    column -= part.rows;
  }
  LOG(FATAL) << "column past the parts' rows";
}

// Column j of the panel from a Q4_0 row: nibbles and d copied.
void CopyQ4_0Column(const uint8_t* row, const PackedShape& shape, int j, uint8_t* panel) {
  for (int b = 0; b < shape.k / kBlock; ++b) {
    const uint8_t* src = row + b * kQ4_0Bytes;
    uint8_t* block = panel + shape.int4_block_offset(b);
    for (int i = 0; i < 16; ++i) {
      const NibbleAt lo = Nibble(shape.panel_width, j, i),
                     hi = Nibble(shape.panel_width, j, i + 16);
      block[lo.byte] |= static_cast<uint8_t>((src[2 + i] & 0xF) << lo.shift);
      block[hi.byte] |= static_cast<uint8_t>((src[2 + i] >> 4) << hi.shift);
    }
    StoreU16(block + 16 * shape.panel_width + 2 * j, LoadU16(src));
  }
}

// Column j from a Q4_K row: nibbles, 6-bit scales and mins as bytes, d and dmin copied.
void CopyQ4KColumn(const uint8_t* row, const PackedShape& shape, int j, uint8_t* panel) {
  const int pw = shape.panel_width;
  for (int b = 0; b < shape.k / kBlock; ++b) {
    const int sub = b % PackedShape::kQ4KBlocks;
    const uint8_t* src = row + (b / PackedShape::kQ4KBlocks) * kQ4KBytes;
    uint8_t* block = panel + shape.int4_block_offset(b);
    if (sub == 0) {
      uint8_t* header = block - shape.int4_header_bytes();
      StoreU16(header + 2 * j, LoadU16(src));
      StoreU16(header + 2 * pw + 2 * j, LoadU16(src + 2));
    }
    uint8_t sc, m;
    Q4KScaleMin(sub, src + 4, &sc, &m);
    block[16 * pw + j] = sc;
    block[17 * pw + j] = m;
    // Sub-blocks 2c and 2c + 1 are the low and high nibbles of qs[32c .. 32c + 31].
    const uint8_t* qs = src + 16 + (sub / 2) * 32;
    const int shift = sub % 2 == 0 ? 0 : 4;
    for (int i = 0; i < kBlock; ++i) {
      const NibbleAt at = Nibble(pw, j, i);
      block[at.byte] |= static_cast<uint8_t>(((qs[i] >> shift) & 0xF) << at.shift);
    }
  }
}

// Column j rounded to Q4_0 blocks from k floats.
void QuantizeColumn(const float* w, const PackedShape& shape, int j, uint8_t* panel) {
  for (int b = 0; b < shape.num_int8_blocks(); ++b) {
    uint8_t* block = panel + shape.int4_block_offset(b);
    uint16_t d;
    uint8_t q[kBlock];
    QuantizeQ4_0Block(w + b * kBlock, std::min(kBlock, shape.k - b * kBlock), &d, q);
    for (int i = 0; i < kBlock; ++i) {
      const NibbleAt at = Nibble(shape.panel_width, j, i);
      block[at.byte] |= static_cast<uint8_t>(q[i] << at.shift);
    }
    StoreU16(block + 16 * shape.panel_width + 2 * j, d);
  }
}

// Rounding w[0..n) with scale d: q into `q` when not null.
struct Rounding {
  float squared_error = 0.0f, max_error = 0.0f;
};
Rounding RoundWithScale(const float* w, int n, float d, uint8_t* q) {
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  Rounding r;
  for (int i = 0; i < n; ++i) {
    const float v = std::clamp(std::nearbyint(w[i] * inverse) + 8.0f, 0.0f, 15.0f);
    const float e = w[i] - (v - 8.0f) * d;
    r.squared_error += e * e;
    r.max_error = std::max(r.max_error, std::fabs(e));
    if (q) q[i] = static_cast<uint8_t>(v);
  }
  return r;
}

}  // namespace

PackedShape::Int4Scales ChooseInt4Scales(std::span<const TensorView> parts) {
  const bool all_q4k = std::all_of(parts.begin(), parts.end(),
                                   [](const TensorView& p) { return p.type == GgmlType::kQ4_K; });
  return all_q4k ? PackedShape::Int4Scales::kQ4_K : PackedShape::Int4Scales::kQ4_0;
}

PackedShape Int4Shape(std::span<const TensorView> parts, int panel_width) {
  CHECK(!parts.empty());
  int64_t rows = 0;
  for (const TensorView& p : parts) {
    CHECK_EQ(p.cols, parts[0].cols);
    rows += p.rows;
  }
  PackedShape shape{.k = static_cast<int>(parts[0].cols),
                    .n = static_cast<int>(rows),
                    .panel_width = panel_width,
                    .k_padded = static_cast<int>((parts[0].cols + kBlock - 1) / kBlock * kBlock),
                    .dtype = WeightDtype::kInt4,
                    .int4_scales = ChooseInt4Scales(parts)};
  // Q4_K rows are whole blocks of 256, so k_padded = k is a whole number of headers.
  if (shape.int4_scales == PackedShape::Int4Scales::kQ4_K) CHECK_EQ(shape.k % kQ4KValues, 0);
  return shape;
}

void PackInt4Panel(std::span<const TensorView> parts, const PackedShape& shape, int panel_index,
                   uint8_t* panel) {
  const int pw = shape.panel_width;
  std::memset(panel, 0, shape.panel_bytes());
  std::vector<float> floats;
  const int cols = std::min(pw, shape.n - panel_index * pw);
  for (int j = 0; j < cols; ++j) {
    const Source src = Locate(parts, static_cast<int64_t>(panel_index) * pw + j);
    const GgmlType type = src.part->type;
    if (shape.int4_scales == PackedShape::Int4Scales::kQ4_K) {
      CHECK(type == GgmlType::kQ4_K) << "Q4_K scales from a part of another type";
      CopyQ4KColumn(src.part->row(src.row), shape, j, panel);
    } else if (type == GgmlType::kQ4_0) {
      CopyQ4_0Column(src.part->row(src.row), shape, j, panel);
    } else {
      floats.resize(shape.k);
      DequantizeRows(*src.part, src.row, 1, floats.data());
      QuantizeColumn(floats.data(), shape, j, panel);
    }
  }
}

void Int4Row(const uint8_t* packed, const PackedShape& shape, int i, float* out) {
  const int pw = shape.panel_width, j = i % pw;
  const uint8_t* panel = packed + (i / pw) * shape.panel_bytes();
  const bool q4k = shape.int4_scales == PackedShape::Int4Scales::kQ4_K;
  for (int b = 0; b * kBlock < shape.k; ++b) {
    const uint8_t* block = panel + shape.int4_block_offset(b);
    float scale, min;
    if (q4k) {
      // As DequantizeGgml: d1 = d·sc and m1 = dmin·m in f32 (both exact), then d1·q − m1.
      const uint8_t* header =
          panel + shape.int4_block_offset(b / PackedShape::kQ4KBlocks * PackedShape::kQ4KBlocks) -
          shape.int4_header_bytes();
      scale = HalfToFloat(LoadU16(header + 2 * j)) * block[16 * pw + j];
      min = HalfToFloat(LoadU16(header + 2 * pw + 2 * j)) * block[17 * pw + j];
    } else {
      scale = HalfToFloat(LoadU16(block + 16 * pw + 2 * j));
      min = 0.0f;
    }
    for (int kk = b * kBlock; kk < std::min(shape.k, (b + 1) * kBlock); ++kk) {
      const NibbleAt at = Nibble(pw, j, kk % kBlock);
      const int q = (block[at.byte] >> at.shift) & 0xF;
      out[kk] = q4k ? scale * q - min : (q - 8) * scale;
    }
  }
}

void QuantizeQ4_0Block(const float* w, int n, uint16_t* d, uint8_t* q) {
  float max = 0.0f;  // the value of largest magnitude, with its sign
  for (int i = 0; i < n; ++i) {
    if (std::fabs(w[i]) > std::fabs(max)) max = w[i];
  }
  std::fill(q, q + kBlock, uint8_t{8});
  *d = 0;
  if (max == 0.0f) return;
  // llama.cpp's divisor first: a later candidate must have a smaller squared error, and no
  // value further off than llama.cpp's rounding allows (a step, amax / 8). Each candidate's
  // rounding is refitted once: the least-squares d for its q.
  float best = INFINITY, limit = 0.0f;
  const auto consider = [&](float scale) {
    const uint16_t half = FloatToHalf(scale);
    const Rounding r = RoundWithScale(w, n, HalfToFloat(half), nullptr);
    if (limit == 0.0f) limit = std::max(std::fabs(max) / 8, r.max_error);
    if (r.squared_error < best && r.max_error <= limit) {
      best = r.squared_error;
      *d = half;
    }
  };
  for (int step = 0; step <= 12; ++step) {
    const float divisor = step <= 6 ? -8.0f + 0.25f * step : 6.5f + 0.25f * (step - 7);
    consider(max / divisor);
    uint8_t candidate[kBlock];
    RoundWithScale(w, n, HalfToFloat(FloatToHalf(max / divisor)), candidate);
    float wq = 0.0f, qq = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float v = static_cast<float>(candidate[i]) - 8.0f;
      wq += w[i] * v;
      qq += v * v;
    }
    if (qq > 0.0f) consider(wq / qq);
  }
  RoundWithScale(w, n, HalfToFloat(*d), q);
}

}  // namespace pagoda
