#include "common/model/ggml_quant.h"

#include <cstring>

#include "common/numeric.h"

namespace pagoda {
namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ4_K, "Q4_K", 256, 144},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float F16(const uint8_t* p) { return HalfToFloat(Load<uint16_t>(p)); }

// One block of `type` at `b` into `y` (block values), as llama.cpp's dequantize_row_*.
void DequantizeBlock(GgmlType type, const uint8_t* b, float* y) {
  switch (type) {
    case GgmlType::kF32:
      *y = Load<float>(b);
      return;
    case GgmlType::kF16:
      *y = F16(b);
      return;
    case GgmlType::kBF16:
      *y = Bf16ToFloat(Load<uint16_t>(b));
      return;
    case GgmlType::kQ4_0: {  // f16 d | 16 bytes: low nibbles values 0..15, high 16..31
      const float d = F16(b);
      for (int j = 0; j < 16; ++j) {
        y[j] = ((b[2 + j] & 0xF) - 8) * d;
        y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
      }
      return;
    }
    case GgmlType::kQ8_0: {  // f16 d | int8 qs[32]
      const float d = F16(b);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
      return;
    }
    case GgmlType::kQ4_K: {  // f16 d | f16 dmin | scales[12] | qs[128]
      const float d = F16(b), min = F16(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* q = b + 16;
      for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        uint8_t sc, m;
        Q4KScaleMin(is, scales, &sc, &m);
        const float d1 = d * sc, m1 = min * m;
        Q4KScaleMin(is + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = min * m;
        for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      }
      return;
    }
    case GgmlType::kQ6_K: {  // ql[128] | qh[64] | int8 scales[16] | f16 d
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = F16(b + 208);
      for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * sc[is] * q1;
          y[l + 32] = d * sc[is + 2] * q2;
          y[l + 64] = d * sc[is + 4] * q3;
          y[l + 96] = d * sc[is + 6] * q4;
        }
      }
      return;
    }
  }
}

}  // namespace

void Q4KScaleMin(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

const GgmlTypeInfo* FindGgmlType(uint32_t type) {
  for (const GgmlTypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == type) return &t;
  }
  return nullptr;
}

void DequantizeGgml(GgmlType type, const uint8_t* blocks, int64_t num_blocks, float* out) {
  const GgmlTypeInfo& info = *FindGgmlType(static_cast<uint32_t>(type));  // all are in kTypes
  for (int64_t b = 0; b < num_blocks; ++b) {
    DequantizeBlock(type, blocks + b * info.block_bytes, out + b * info.block_values);
  }
}

}  // namespace pagoda
