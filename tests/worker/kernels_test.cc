// Every kernel table this CPU can run, against float64 references: Linear (packing + GEMM) at
// row counts on both sides of each ISA's register tile, RMSNorm and SwiGLU. Paged attention
// has its own test, which runs each table too.
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/kernels/isa.h"
#include "worker/linear.h"

namespace pagoda {
namespace {

class KernelsTest : public ::testing::TestWithParam<const Kernels*> {
 protected:
  void SetUp() override { previous_ = SetActiveKernelsForTesting(GetParam()); }
  void TearDown() override { SetActiveKernelsForTesting(previous_); }
  const Kernels& kernels() const { return *GetParam(); }

  std::vector<float> Random(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal_(rng_);
    return v;
  }

  std::mt19937 rng_{42};
  std::normal_distribution<float> normal_;
  const Kernels* previous_ = nullptr;
};

TEST_P(KernelsTest, LinearEqualsAFloat64Reference) {
  omp_set_num_threads(3);  // uneven splits of the panels
  struct Shape {
    int in, out;
  };
  // Widths below, at and past one panel (16 or 32), a k that is not a multiple of 16, and
  // one longer than the GEMM's k block (256) that is not a multiple of it.
  const Shape shapes[] = {{1, 1}, {17, 15}, {64, 16}, {100, 33}, {48, 70}, {33, 130}, {300, 40}};
  const int row_counts[] = {1, 2, 3, 5, 6, 7, 11, 12, 13, 25, 64};
  for (const Shape& s : shapes) {
    for (const bool with_bias : {false, true}) {
      for (const bool accumulate : {false, true}) {
        const std::vector<float> w = Random(static_cast<size_t>(s.out) * s.in);
        const std::vector<float> bias = with_bias ? Random(s.out) : std::vector<float>();
        const Linear linear(w.data(), s.in, s.out, bias, accumulate);
        for (const int rows : row_counts) {
          const std::vector<float> x = Random(static_cast<size_t>(rows) * s.in);
          const std::vector<float> y0 = Random(static_cast<size_t>(rows) * s.out);
          std::vector<float> y = y0;
          linear.Run(x.data(), rows, y.data());
          for (int r = 0; r < rows; ++r) {
            for (int o = 0; o < s.out; ++o) {
              double want = with_bias ? bias[o] : 0.0, magnitude = std::abs(want);
              for (int i = 0; i < s.in; ++i) {
                const double p = static_cast<double>(x[r * s.in + i]) * w[o * s.in + i];
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

TEST_P(KernelsTest, RmsNormEqualsAFloat64Reference) {
  for (const int n : {1, 7, 8, 16, 33, 100, 768}) {
    const std::vector<float> x = Random(n), w = Random(n);
    std::vector<float> out(n);
    kernels().rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) {
      const double want = w[i] * scale * x[i];
      ASSERT_NEAR(out[i], want, 1e-5 * (std::abs(want) + 1e-3)) << "n " << n << " at " << i;
    }
    std::vector<float> in_place = x;
    kernels().rms_norm(in_place.data(), w.data(), n, 1e-5f, in_place.data());
    EXPECT_EQ(in_place, out) << "n " << n;
  }
}

TEST_P(KernelsTest, SwiGluEqualsAFloat64Reference) {
  for (const int n : {1, 7, 8, 16, 33, 100, 2048}) {
    std::vector<float> gate = Random(n), up = Random(n), h(n);
    gate[0] = -90.0f;  // far into e^x's clamp
    if (n > 1) gate[1] = 90.0f;
    kernels().swiglu(gate.data(), up.data(), n, h.data());
    for (int i = 0; i < n; ++i) {
      const double g = gate[i];
      const double want = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(h[i], want, 2e-6 * (std::abs(want) + 1e-3)) << "n " << n << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelsTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

TEST(IsaTest, TheChosenTableIsOneThisCpuRuns) {
  const Kernels& active = ActiveKernels();
  bool found = false;
  for (const Kernels* k : SupportedKernels()) found |= k == &active;
  EXPECT_TRUE(found) << active.name;
}

}  // namespace
}  // namespace pagoda
