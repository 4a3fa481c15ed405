// Every kernel table this CPU can run, against float64 references: RMSNorm and SwiGLU. Linear
// (packing + GEMM, every precision) and paged attention have their own tests, which run each
// table too.

#include "worker/kernels/kernels.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/kernels/isa.h"

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
