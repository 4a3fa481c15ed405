#include "worker/kv_dtype.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

float FromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

TEST(KvDtypeTest, NamesAndSizes) {
  EXPECT_STREQ(KvDtypeName(KvDtype::kF32), "f32");
  EXPECT_STREQ(KvDtypeName(KvDtype::kBf16), "bf16");
  EXPECT_STREQ(KvDtypeName(KvDtype::kF16), "f16");
  EXPECT_EQ(KvDtypeBytes(KvDtype::kF32), 4);
  EXPECT_EQ(KvDtypeBytes(KvDtype::kBf16), 2);
  EXPECT_EQ(KvDtypeBytes(KvDtype::kF16), 2);
}

// Values that stress rounding: random bit patterns (every exponent, subnormals, inf, NaN),
// exact halfway cases of both 16-bit types, and the edges of f16's range.
std::vector<float> HardValues() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          -65520.0f,
                          3e38f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          0x1p-24f,
                          0x1p-25f,
                          0x1.8p-24f,
                          0x1p-14f,
                          1.0f + 0x1p-11f,
                          1.0f + 3 * 0x1p-11f,
                          FromBits(0x3f808000),
                          FromBits(0x3f818000),
                          FromBits(0x3f807fff),
                          FromBits(0x7f7fffff),
                          FromBits(0x7f800001),
                          FromBits(0xff800001)};
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 200000; ++i) v.push_back(i % 2 ? FromBits(any_bits(rng)) : normal(rng));
  return v;
}

// The vectorized write path against the loader's scalar conversions, at every offset so both
// the 8-wide body and the element-wise tail run.
TEST(KvDtypeTest, ConvertFromFloatRoundsLikeTheScalarConversions) {
  const std::vector<float> values = HardValues();
  std::vector<uint16_t> out(values.size());
  for (KvDtype dtype : {KvDtype::kBf16, KvDtype::kF16}) {
    for (int skip : {0, 3}) {
      const int n = static_cast<int>(values.size()) - skip;
      ConvertFromFloat(values.data() + skip, n, dtype, out.data());
      for (int i = 0; i < n; ++i) {
        const float x = values[skip + i];
        const bool bf16 = dtype == KvDtype::kBf16;
        const float back = bf16 ? Bf16ToFloat(out[i]) : HalfToFloat(out[i]);
        if (std::isnan(x)) {
          ASSERT_TRUE(std::isnan(back)) << KvDtypeName(dtype) << " " << i;
          ASSERT_EQ(std::signbit(back), std::signbit(x));
        } else {
          ASSERT_EQ(out[i], bf16 ? FloatToBf16(x) : FloatToHalf(x))
              << KvDtypeName(dtype) << " " << std::hexfloat << x;
        }
      }
    }
  }
}

TEST(KvDtypeTest, RoundingIsToNearestEvenAndOverflowIsInf) {
  auto bf16 = [](float x) {
    uint16_t h;
    ConvertFromFloat(&x, 1, KvDtype::kBf16, &h);
    return h;
  };
  auto f16 = [](float x) {
    uint16_t h;
    ConvertFromFloat(&x, 1, KvDtype::kF16, &h);
    return h;
  };
  EXPECT_EQ(bf16(FromBits(0x3f808000)), 0x3f80);  // halfway: to even
  EXPECT_EQ(bf16(FromBits(0x3f818000)), 0x3f82);
  EXPECT_EQ(bf16(FromBits(0x7f7fffff)), 0x7f80);  // max float: inf
  EXPECT_EQ(bf16(3e38f), 0x7f62);                 // bf16 keeps f32's range ...
  EXPECT_EQ(f16(3e38f), 0x7c00);                  // ... f16 does not
  EXPECT_EQ(f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f16(65519.0f), 0x7bff);
  EXPECT_EQ(f16(65520.0f), 0x7c00);
  // A NaN whose payload is only in the bits bf16 drops stays NaN (truncation would give inf).
  EXPECT_TRUE(std::isnan(Bf16ToFloat(bf16(FromBits(0x7f800001)))));
}

TEST(KvDtypeTest, F32IsCopiedBitForBit) {
  const float src[3] = {1.5f, -0.1f, NAN};
  float dst[3];
  ConvertFromFloat(src, 3, KvDtype::kF32, dst);
  EXPECT_EQ(std::memcmp(dst, src, sizeof(src)), 0);
}

}  // namespace
}  // namespace pagoda
