// Linear (packing + GEMM) in f32, bf16, int8 and int4, under every kernel table this CPU can run,
// at row counts on both sides of each register tile, against float64 references: f32 and bf16
// equal f32 arithmetic on the (bf16-rounded) weights; int8 and int4 equal the product
// of the dequantized weights (Row) and activations quantized as Q8_0 rounds them, computed
// here independently; Row() is the stored matrix, within each precision's rounding.
#include "worker/linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/numeric.h"
#include "gtest/gtest.h"
#include "worker/kernels/isa.h"

namespace pagoda {
namespace {

float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

// x as the int8 GEMM sees it: per block of 32, q = round(x · 127 / amax), times amax / 127.
std::vector<double> QuantizedActivations(const std::vector<float>& x, int rows, int k) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int k0 = 0; k0 < k; k0 += 32) {
      const int n = std::min(32, k - k0);
      const float* src = &x[static_cast<size_t>(r) * k + k0];
      float amax = 0;
      for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float inverse = amax > 0 ? 127.0f / amax : 0.0f, d = amax / 127.0f;
      for (int i = 0; i < n; ++i) {
        const float q = std::clamp(std::nearbyint(src[i] * inverse), -127.0f, 127.0f);
        out[static_cast<size_t>(r) * k + k0 + i] = static_cast<double>(q) * d;
      }
    }
  }
  return out;
}

using Param = std::tuple<const Kernels*, WeightDtype>;

class LinearTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { previous_ = SetActiveKernelsForTesting(std::get<0>(GetParam())); }
  void TearDown() override { SetActiveKernelsForTesting(previous_); }
  WeightDtype dtype() const { return std::get<1>(GetParam()); }

  std::vector<float> Random(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal_(rng_);
    return v;
  }

  std::mt19937 rng_{7};
  std::normal_distribution<float> normal_;
  const Kernels* previous_ = nullptr;
};

TEST_P(LinearTest, RowIsTheStoredMatrix) {
  const int in = 100, out = 70;
  const std::vector<float> w = Random(static_cast<size_t>(out) * in);
  const Linear linear(w.data(), in, out, {}, false, dtype());
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    linear.Row(o, row.data());
    for (int k0 = 0; k0 < in; k0 += 32) {
      float amax = 0;
      for (int i = k0; i < std::min(in, k0 + 32); ++i)
        amax = std::max(amax, std::fabs(w[o * in + i]));
      for (int i = k0; i < std::min(in, k0 + 32); ++i) {
        const float want = w[o * in + i];
        if (dtype() == WeightDtype::kF32) {
          ASSERT_EQ(row[i], want) << o << ", " << i;
        } else if (dtype() == WeightDtype::kBf16) {
          ASSERT_EQ(row[i], RoundToBf16(want)) << o << ", " << i;
        } else if (dtype() == WeightDtype::kInt4) {
          // Q4_0's rounding: at most a step of amax / 8 (worker/int4_pack.h), and d's f16.
          ASSERT_NEAR(row[i], want, amax / 8 * 1.01) << o << ", " << i;
        } else {
          // Half a step of the block's scale, and the scale's own f16 rounding.
          ASSERT_NEAR(row[i], want, amax / 127 * 0.51 + amax * 1e-3) << o << ", " << i;
        }
      }
    }
  }
}

TEST_P(LinearTest, EqualsAFloat64ReferenceOfWhatItStores) {
  omp_set_num_threads(3);  // uneven splits of the panels
  struct Shape {
    int in, out;
  };
  // Widths below, at and past one panel, k not a multiple of 32 or of the f32 k block (256).
  const Shape shapes[] = {{1, 1}, {17, 15}, {64, 16}, {100, 33}, {48, 70}, {300, 130}};
  const int row_counts[] = {1, 2, 3, 5, 6, 7, 11, 12, 13, 25, 64};
  for (const Shape& s : shapes) {
    for (const bool with_bias : {false, true}) {
      for (const bool accumulate : {false, true}) {
        const std::vector<float> w = Random(static_cast<size_t>(s.out) * s.in);
        const std::vector<float> bias = with_bias ? Random(s.out) : std::vector<float>();
        const Linear linear(w.data(), s.in, s.out, bias, accumulate, dtype());
        std::vector<float> stored(w.size());
        for (int o = 0; o < s.out; ++o) linear.Row(o, &stored[static_cast<size_t>(o) * s.in]);
        for (const int rows : row_counts) {
          const std::vector<float> x = Random(static_cast<size_t>(rows) * s.in);
          std::vector<double> xd(x.begin(), x.end());
          if (dtype() == WeightDtype::kInt8 || dtype() == WeightDtype::kInt4) {
            xd = QuantizedActivations(x, rows, s.in);
          }
          const std::vector<float> y0 = Random(static_cast<size_t>(rows) * s.out);
          std::vector<float> y = y0;
          linear.Run(x.data(), rows, y.data());
          for (int r = 0; r < rows; ++r) {
            for (int o = 0; o < s.out; ++o) {
              double want = with_bias ? bias[o] : 0.0, magnitude = std::abs(want);
              for (int i = 0; i < s.in; ++i) {
                const double p = xd[r * s.in + i] * stored[o * s.in + i];
                want += p;
                magnitude += std::abs(p);
              }
              if (accumulate) want += y0[r * s.out + o];
              ASSERT_NEAR(y[r * s.out + o], want, 1e-6 * (magnitude + 1.0))
                  << s.in << " -> " << s.out << ", " << rows << " rows, row " << r << " col " << o
                  << (with_bias ? ", bias" : "") << (accumulate ? ", accumulating" : "");
            }
          }
        }
      }
    }
  }
}

TEST_P(LinearTest, WeightBytesAreThePrecisionsOwn) {
  const int in = 2048, out = 512;
  const std::vector<float> w(static_cast<size_t>(out) * in, 0.5f);
  const Linear linear(w.data(), in, out, {}, false, dtype());
  const double per_weight = static_cast<double>(linear.weight_bytes()) / (in * out);
  // f32: 4 bytes; bf16: 2; int8: Q8_0's 34 bytes per 32; int4: Q4_0's 18.
  EXPECT_DOUBLE_EQ(per_weight, dtype() == WeightDtype::kF32    ? 4.0
                               : dtype() == WeightDtype::kBf16 ? 2.0
                               : dtype() == WeightDtype::kInt8 ? 34.0 / 32
                                                               : 18.0 / 32);
}

// A Q8_0 block's values (q · d, d an f16) come back exactly: the layout holds what GGUF's Q8_0
// files hold, and a model dequantized from one loads into int8 without a second rounding.
TEST_P(LinearTest, Q8ZeroValuesRoundTripExactly) {
  if (dtype() != WeightDtype::kInt8) return;
  const int in = 64, out = 40;
  std::vector<float> w(static_cast<size_t>(out) * in);
  std::uniform_int_distribution<int> q(-127, 127);
  for (int o = 0; o < out; ++o) {
    for (int k0 = 0; k0 < in; k0 += 32) {
      const float d = _cvtsh_ss(_cvtss_sh(0.001f * (1 + o + k0), _MM_FROUND_TO_NEAREST_INT));
      for (int i = 0; i < 32; ++i) w[o * in + k0 + i] = static_cast<float>(q(rng_)) * d;
      w[o * in + k0] = 127 * d;  // Q8_0 blocks reach ±127
    }
  }
  const Linear linear(w.data(), in, out, {}, false, dtype());
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    linear.Row(o, row.data());
    for (int i = 0; i < in; ++i) ASSERT_EQ(row[i], w[o * in + i]) << o << ", " << i;
  }
}

std::vector<Param> Params() {
  std::vector<Param> out;
  for (const Kernels* k : SupportedKernels()) {
    out.emplace_back(k, WeightDtype::kF32);
    out.emplace_back(k, WeightDtype::kBf16);
    out.emplace_back(k, WeightDtype::kInt8);
    out.emplace_back(k, WeightDtype::kInt4);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IsaAndDtype, LinearTest, ::testing::ValuesIn(Params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(std::get<0>(info.param)->name) + "_" +
                                  WeightDtypeName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace pagoda
