#include "worker/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
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
  EXPECT_STREQ(KvDtypeName(KvDtype::kInt8), "int8");
  EXPECT_STREQ(KvLayoutName(KvDtype::kBf16), "bf16");
  EXPECT_STREQ(KvLayoutName(KvDtype::kInt8), "int8-hadamard");
  EXPECT_EQ(KvRowBytes(KvDtype::kF32, 64), 256);
  EXPECT_EQ(KvRowBytes(KvDtype::kBf16, 64), 128);
  EXPECT_EQ(KvRowBytes(KvDtype::kF16, 64), 128);
  EXPECT_EQ(KvRowBytes(KvDtype::kInt8, 64), 66);  // and its f16 scale
  EXPECT_EQ(KvRowBytes(KvDtype::kInt8, 128), 130);
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

// R of kv_dtype.h: orthogonal (Rᵀ·R·x = x, norms and dot products kept) at head sizes whose
// groups take the vector path (8 and up) and the scalar one (20: groups of 4; 7: of 1).
TEST(KvDtypeTest, Int8BasisIsARotation) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int head_dim : {1, 2, 7, 8, 16, 20, 64, 96, 128, 256}) {
    std::vector<float> x(head_dim), y(head_dim);
    for (float& e : x) e = normal(rng);
    for (float& e : y) e = normal(rng);
    std::vector<float> rx = x, ry = y;
    RotateToInt8Basis(rx.data(), head_dim);
    RotateToInt8Basis(ry.data(), head_dim);
    double dot = 0, rdot = 0, norm = 0, rnorm = 0;
    for (int d = 0; d < head_dim; ++d) {
      dot += x[d] * y[d];
      rdot += rx[d] * ry[d];
      norm += x[d] * x[d];
      rnorm += rx[d] * rx[d];
    }
    EXPECT_NEAR(rdot, dot, 1e-4 * norm) << head_dim;
    EXPECT_NEAR(rnorm, norm, 1e-5 * norm) << head_dim;
    std::vector<float> back = rx;
    RotateFromInt8Basis(back.data(), head_dim);
    for (int d = 0; d < head_dim; ++d) ASSERT_NEAR(back[d], x[d], 1e-5f) << head_dim << " " << d;
    if (head_dim >= 8) {
      EXPECT_NE(rx, x) << head_dim;  // it does move the row
    }
  }
  // A row with one large element (an outlier channel) is spread over its group of 64.
  std::vector<float> outlier(64, 0.1f);
  outlier[5] = 64.0f;
  RotateToInt8Basis(outlier.data(), 64);
  for (float e : outlier) EXPECT_LT(std::fabs(e), 64.0f / 8 + 1.0f);
}

// The int8 row as the spec reads: r = R·x, scale = max|r| / 127 rounded to f16, q = r / scale
// rounded to nearest even, written with the vectorized path at every length up to two vectors
// past 32; it reads back as Rᵀ·(q · scale).
TEST(KvDtypeTest, Int8RowsAreQuantizedByTheirAbsMaxWithAnF16Scale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int head_dim = 1; head_dim <= 48; ++head_dim) {
    for (int block_size : {1, 3, 16}) {
      std::vector<std::byte> run(static_cast<size_t>(block_size) * (head_dim + 2), std::byte{0x55});
      const int offset = block_size - 1;
      std::vector<float> x(head_dim);
      for (float& e : x) e = normal(rng);
      WriteKvRow(x.data(), head_dim, KvDtype::kInt8, block_size, offset, run.data());
      std::vector<float> r = x;
      RotateToInt8Basis(r.data(), head_dim);
      float absmax = 0;
      for (float e : r) absmax = std::max(absmax, std::fabs(e));
      const float scale = HalfToFloat(FloatToHalf(absmax / 127.0f));
      uint16_t stored_scale;
      std::memcpy(&stored_scale, &run[static_cast<size_t>(block_size) * head_dim + 2 * offset], 2);
      ASSERT_EQ(stored_scale, FloatToHalf(absmax / 127.0f)) << head_dim;
      std::vector<float> dequantized(head_dim);
      for (int d = 0; d < head_dim; ++d) {
        const float q = std::clamp(std::nearbyint(r[d] / scale), -127.0f, 127.0f);
        ASSERT_EQ(static_cast<int8_t>(run[static_cast<size_t>(offset) * head_dim + d]), q)
            << "head_dim " << head_dim << " d " << d << " r " << r[d];
        dequantized[d] = q * scale;
      }
      RotateFromInt8Basis(dequantized.data(), head_dim);
      std::vector<float> back(head_dim);
      ReadKvRow(run.data(), head_dim, KvDtype::kInt8, block_size, offset, back.data());
      ASSERT_EQ(back, dequantized) << head_dim;
      // Each rotated element is within half a step, so the row is within √head_dim of them.
      double error = 0;
      for (int d = 0; d < head_dim; ++d) error += (back[d] - x[d]) * (back[d] - x[d]);
      ASSERT_LE(std::sqrt(error), (0.5f * scale * 1.01f + absmax * 0x1p-11f) * std::sqrt(head_dim));
      // The other rows of the run are untouched.
      ASSERT_EQ(run[0], offset == 0 ? run[0] : std::byte{0x55});
    }
  }
}

// What the rotation is for: a K row with an outlier channel keeps its small elements. Without
// it the step is 64/127 and every 0.1 rounds to 0.
TEST(KvDtypeTest, Int8KeepsTheSmallElementsOfARowWithAnOutlier) {
  constexpr int kDim = 64;
  std::vector<float> x(kDim), back(kDim);
  for (int d = 0; d < kDim; ++d) x[d] = 0.1f * (d % 3 == 0 ? 1 : -1);
  x[5] = 64.0f;
  std::vector<std::byte> run(kDim + 2);
  WriteKvRow(x.data(), kDim, KvDtype::kInt8, 1, 0, run.data());
  ReadKvRow(run.data(), kDim, KvDtype::kInt8, 1, 0, back.data());
  double error = 0;
  for (int d = 0; d < kDim; ++d) error += (back[d] - x[d]) * (back[d] - x[d]);
  EXPECT_LT(std::sqrt(error / kDim), 0.05);  // unrotated: 0.1 per element
  EXPECT_NEAR(back[5], 64.0f, 0.1f);
}

TEST(KvDtypeTest, Int8EdgeRows) {
  constexpr int kDim = 16;
  std::vector<std::byte> run(kDim + 2);
  std::vector<float> back(kDim);
  auto round_trip = [&](std::vector<float> x) {
    WriteKvRow(x.data(), kDim, KvDtype::kInt8, 1, 0, run.data());
    ReadKvRow(run.data(), kDim, KvDtype::kInt8, 1, 0, back.data());
    return back;
  };
  // Zeros stay zeros.
  for (float e : round_trip(std::vector<float>(kDim, 0.0f))) EXPECT_EQ(e, 0.0f);
  // A row far below f16's normal range still reads back close (its scale is subnormal or 0).
  std::vector<float> tiny(kDim, 1e-9f);
  for (float e : round_trip(tiny)) EXPECT_LE(std::fabs(e - 1e-9f), 1e-9f);
  // A NaN or an infinity, or a row past f16's range, reads back as NaNs, never as numbers.
  for (float bad : {NAN, INFINITY, -INFINITY, 1e7f * 127}) {
    std::vector<float> y(kDim, 1.0f);
    y[5] = bad;
    for (float e : round_trip(y)) EXPECT_TRUE(std::isnan(e)) << bad;
  }
}

}  // namespace
}  // namespace pagoda
