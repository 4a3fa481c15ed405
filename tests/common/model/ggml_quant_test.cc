// ggml's blocks decode as llama.cpp lays them out: Q8_0 back to the values it was made from,
// the K-quants and Q4_0 field by field.
#include "common/model/ggml_quant.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "gtest/gtest.h"
#include "tests/common/model/gguf_writer.h"

namespace pagoda {
namespace {

// `data` (whole blocks of `type`) decoded as `n` floats.
std::vector<float> DecodeBlocks(GgmlType type, const std::vector<uint8_t>& data, int64_t n) {
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
  std::vector<float> out(n);
  DequantizeGgml(type, data.data(), n / info->block_values, out.data());
  return out;
}

TEST(GgmlQuantTest, Q8_0DecodesToTheValuesItWasMadeFrom) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> values(32 * 40);
  for (float& x : values) x = d(rng);
  values[5] = 0;
  std::fill(values.begin() + 64, values.begin() + 96, 0.0f);  // an all-zero block
  const std::vector<uint8_t> q = testing::QuantizeQ8_0(values);
  ASSERT_EQ(q.size(), 40u * 34);
  const std::vector<float> back = DecodeBlocks(GgmlType::kQ8_0, q, values.size());
  for (size_t b = 0; b < 40; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[b * 32 + j]));
    const float step = HalfToFloat(FloatToHalf(amax / 127));
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      // Half a step of rounding, plus the scale's own f16 rounding over up to 127 steps.
      EXPECT_NEAR(back[i], values[i], step * 0.5f + amax * 1e-3f) << i;
    }
  }
  EXPECT_EQ(back[5], 0.0f);
  EXPECT_EQ(back[70], 0.0f);
}

TEST(GgmlQuantTest, KQuantAndQ4_0BlocksDecodeAsLlamaCppLaysThemOut) {
  // Q6_K: ql[128] qh[64] scales[16] d. With d = 1 and every scale 1, value = q - 32, where
  // q's low 4 bits come from ql and its high 2 bits from qh (see dequantize_row_q6_K).
  std::vector<uint8_t> q6(210, 0);
  for (int i = 192; i < 208; ++i) q6[i] = 1;
  q6[192 + 2] = 3;  // scale of values 32..47 of the first half
  q6[208] = 0x00;   // d = 1.0 (f16 0x3C00)
  q6[209] = 0x3C;
  q6[0] = 0x5A;          // value 0: low nibble 0xA; value 64: high nibble 0x5
  q6[128] = 0b11100100;  // value 0: +0<<4, value 32: +1<<4, value 64: +2<<4, value 96: +3<<4
  q6[32] = 0x07;         // value 32: low nibble 7
  const std::vector<float> y6 = DecodeBlocks(GgmlType::kQ6_K, q6, 256);
  EXPECT_EQ(y6[0], 0xA - 32);
  EXPECT_EQ(y6[32], 3 * ((0x7 | (1 << 4)) - 32)) << "scale 3";
  EXPECT_EQ(y6[64], (0x5 | (2 << 4)) - 32);
  EXPECT_EQ(y6[96], (0 | (3 << 4)) - 32);
  EXPECT_EQ(y6[1], -32);
  EXPECT_EQ(y6[128], -32) << "second half: its own ql/qh/scales";
  // Q4_K: d dmin scales[12] qs[128]. Sub-block j < 4: scale = scales[j] & 63, min =
  // scales[j + 4] & 63; value = d * scale * nibble - dmin * min.
  std::vector<uint8_t> q4(144, 0);
  q4[1] = 0x3C;   // d = 1
  q4[3] = 0x38;   // dmin = 0.5
  q4[4 + 0] = 2;  // sub-block 0: scale 2
  q4[4 + 4] = 3;  // sub-block 0: min 3
  q4[4 + 1] = 5;  // sub-block 1 (the high nibbles of the first 32 bytes): scale 5, min 0
  q4[16] = 0x9C;  // value 0: nibble 0xC; value 32: nibble 0x9
  const std::vector<float> y4 = DecodeBlocks(GgmlType::kQ4_K, q4, 256);
  EXPECT_EQ(y4[0], 2 * 12 - 0.5f * 3);
  EXPECT_EQ(y4[1], -1.5f);
  EXPECT_EQ(y4[32], 5 * 9);
  // Sub-blocks 4..7 take their high bits from the top of scales[0..7].
  q4 = std::vector<uint8_t>(144, 0);
  q4[1] = 0x3C;
  q4[4 + 0] = 0x40;    // scale of sub-block 4 gains 1 << 4
  q4[4 + 8] = 0x21;    // sub-block 4: scale low 1, min low 2
  q4[16 + 64] = 0x03;  // value 128 (sub-block 4, low nibbles of bytes 64..95): nibble 3
  const std::vector<float> y4b = DecodeBlocks(GgmlType::kQ4_K, q4, 256);
  EXPECT_EQ(y4b[128], (1 | (1 << 4)) * 3);
  // Q4_0: d | 16 bytes, value j = low nibble - 8, value j + 16 = high nibble - 8.
  std::vector<uint8_t> q40(18, 0x88);
  q40[0] = 0x00;
  q40[1] = 0x40;  // d = 2
  q40[2] = 0xF0;
  const std::vector<float> y40 = DecodeBlocks(GgmlType::kQ4_0, q40, 32);
  EXPECT_EQ(y40[0], -16.0f);
  EXPECT_EQ(y40[16], 14.0f);
  EXPECT_EQ(y40[1], 0.0f);
}

}  // namespace
}  // namespace pagoda
