// The 16-bit float conversions, against values worked out by hand.
#include "common/numeric.h"

#include <cmath>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(NumericTest, HalfAndBfloat16ConvertExactly) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(1.0f / 3), 0x3555);
  EXPECT_EQ(FloatToHalf(-65504.0f), 0xFBFF);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7C00);  // overflow -> infinity
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC0490FDB >> 16), -3.140625f);
  EXPECT_EQ(FloatToBf16(3.14159265f), 0x4049);
  EXPECT_EQ(FloatToBf16(1.00390625f), 0x3F80) << "a tie rounds to even";
}

}  // namespace
}  // namespace pagoda
