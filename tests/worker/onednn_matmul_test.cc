// OneDnnBf16Matmul against a float64 reference over the same bf16 values, with the weights
// packed here by the layout's own formula (BRIEF_LAYOUT: panels of 64 columns, k padded to 16).

#include "worker/onednn_matmul.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

constexpr int kPanelWidth = 64;

// Element (kk, j) of panel p, W[64p + j][kk], at p·k_padded·64 + (kk/2)·128 + 2j + kk%2.
std::vector<uint16_t> Pack(const std::vector<uint16_t>& w, int n, int k, int k_padded) {
  const int num_panels = (n + kPanelWidth - 1) / kPanelWidth;
  std::vector<uint16_t> panels(static_cast<size_t>(num_panels) * k_padded * kPanelWidth, 0);
  for (int row = 0; row < n; ++row) {
    const int p = row / kPanelWidth, j = row % kPanelWidth;
    for (int kk = 0; kk < k; ++kk) {
      panels[static_cast<size_t>(p) * k_padded * kPanelWidth + (kk / 2) * 128 + j * 2 + kk % 2] =
          w[static_cast<size_t>(row) * k + kk];
    }
  }
  return panels;
}

class OneDnnBf16MatmulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!__builtin_cpu_supports("avx512bf16")) {
      GTEST_SKIP() << "the CPU lacks avx512_bf16 (oneDNN would run its reference or emulation)";
    }
  }

  // (count) bf16 values of N(0, 1) floats.
  std::vector<uint16_t> RandomBf16(size_t count) {
    std::vector<uint16_t> v(count);
    for (uint16_t& b : v) b = FloatToBf16(normal_(rng_));
    return v;
  }
  std::vector<float> Random(size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = normal_(rng_);
    return v;
  }

  // Checks y (rows, n; stride ldy) = bf16(x) · Wᵀ [+ bias] [+ y0], to f32 accumulation's error.
  static void ExpectProduct(const std::vector<float>& x, const std::vector<uint16_t>& w,
                            const std::vector<float>& bias, const std::vector<float>& y0,
                            const std::vector<float>& y, int rows, int n, int k, int ldy) {
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < n; ++j) {
        double want = bias.empty() ? 0.0 : bias[j], magnitude = std::abs(want);
        for (int kk = 0; kk < k; ++kk) {
          const double term =
              static_cast<double>(Bf16ToFloat(FloatToBf16(x[static_cast<size_t>(r) * k + kk]))) *
              Bf16ToFloat(w[static_cast<size_t>(j) * k + kk]);
          want += term;
          magnitude += std::abs(term);
        }
        const size_t at = static_cast<size_t>(r) * ldy + j;
        if (!y0.empty()) want += y0[at];
        ASSERT_NEAR(y[at], want, 1e-5 * magnitude + 1e-5)
            << "rows " << rows << " k " << k << " n " << n << " at (" << r << ", " << j << ")";
      }
      for (int j = n; j < ldy; ++j) {
        const size_t at = static_cast<size_t>(r) * ldy + j;
        ASSERT_EQ(y[at], y0.empty() ? -7.0f : y0[at]) << "column " << j << " beyond n written";
      }
    }
  }

  std::mt19937 rng_{24};
  std::normal_distribution<float> normal_;
};

TEST_F(OneDnnBf16MatmulTest, EqualsAFloat64ReferenceAtEveryRowCount) {
  for (const int k : {40, 2048}) {
    for (const int n : {70, 256}) {
      const int k_padded = (k + 15) / 16 * 16;
      const std::vector<uint16_t> w = RandomBf16(static_cast<size_t>(n) * k);
      const std::vector<uint16_t> panels = Pack(w, n, k, k_padded);
      auto matmul = OneDnnBf16Matmul::Create(panels.data(), n, k, k_padded, nullptr, false);
      ASSERT_TRUE(matmul.ok()) << matmul.status();
      EXPECT_EQ(matmul.value()->impl_name().find("ref"), std::string::npos);
      for (const int rows : {1, 2, 7, 64, 100, 513}) {
        const std::vector<float> x = Random(static_cast<size_t>(rows) * k);
        std::vector<float> y(static_cast<size_t>(rows) * n, -7.0f);
        ASSERT_TRUE((*matmul)->Run(x.data(), rows, y.data(), n).ok());
        ExpectProduct(x, w, {}, {}, y, rows, n, k, n);
      }
    }
  }
}

TEST_F(OneDnnBf16MatmulTest, AddsBiasAndAccumulatesIntoAWiderY) {
  for (const int k : {40, 2048}) {
    for (const int n : {70, 256}) {
      const int k_padded = (k + 15) / 16 * 16, ldy = n + 13;
      const std::vector<uint16_t> w = RandomBf16(static_cast<size_t>(n) * k);
      const std::vector<uint16_t> panels = Pack(w, n, k, k_padded);
      const std::vector<float> bias = Random(n);
      for (const bool accumulate : {false, true}) {
        auto matmul =
            OneDnnBf16Matmul::Create(panels.data(), n, k, k_padded, bias.data(), accumulate);
        ASSERT_TRUE(matmul.ok()) << matmul.status();
        for (const int rows : {1, 7, 100}) {
          const std::vector<float> x = Random(static_cast<size_t>(rows) * k);
          std::vector<float> y0 = Random(static_cast<size_t>(rows) * ldy);
          std::vector<float> y = y0;
          if (!accumulate) std::fill(y.begin(), y.end(), -7.0f);
          const absl::Status status = (*matmul)->Run(x.data(), rows, y.data(), ldy);
          ASSERT_TRUE(status.ok()) << status;
          ExpectProduct(x, w, bias, accumulate ? y0 : std::vector<float>{}, y, rows, n, k, ldy);
        }
      }
    }
  }
}

TEST_F(OneDnnBf16MatmulTest, RoundsXToNearestEvenLikeFloatToBf16) {
  // W = the identity on the first k columns: y holds bf16(x) exactly.
  const int k = 48, n = 64;
  std::vector<uint16_t> w(static_cast<size_t>(n) * k, 0);
  for (int i = 0; i < k; ++i) w[static_cast<size_t>(i) * k + i] = FloatToBf16(1.0f);
  const std::vector<uint16_t> panels = Pack(w, n, k, k);
  auto matmul = OneDnnBf16Matmul::Create(panels.data(), n, k, k, nullptr, false);
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  std::vector<float> x = Random(static_cast<size_t>(2) * k);
  // Ties between two bf16 values (to even: down, then up), and just past a tie.
  x[0] = 1.0f + 0x1p-8f;
  x[1] = 1.0f + 3 * 0x1p-8f;
  x[2] = -(1.0f + 0x1p-8f + 0x1p-20f);
  std::vector<float> y(static_cast<size_t>(2) * n);
  ASSERT_TRUE((*matmul)->Run(x.data(), 2, y.data(), n).ok());
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < k; ++i) {
      const float xi = x[static_cast<size_t>(r) * k + i];
      EXPECT_EQ(y[static_cast<size_t>(r) * n + i], Bf16ToFloat(FloatToBf16(xi)))
          << "x " << xi << " at (" << r << ", " << i << ")";
    }
  }
}

TEST_F(OneDnnBf16MatmulTest, AnOwnCopyOutlivesTheCallersPanels) {
  // k_padded = 48 is not a multiple of oneDNN's k block (32): the panels cannot be shared.
  const int n = 70, k = 40, k_padded = 48, rows = 7;
  const std::vector<uint16_t> w = RandomBf16(static_cast<size_t>(n) * k);
  std::vector<uint16_t> panels = Pack(w, n, k, k_padded);
  auto matmul = OneDnnBf16Matmul::Create(panels.data(), n, k, k_padded, nullptr, false);
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  ASSERT_FALSE((*matmul)->uses_caller_layout());
  std::fill(panels.begin(), panels.end(), FloatToBf16(1e30f));
  const std::vector<float> x = Random(static_cast<size_t>(rows) * k);
  std::vector<float> y(static_cast<size_t>(rows) * n, -7.0f);
  ASSERT_TRUE((*matmul)->Run(x.data(), rows, y.data(), n).ok());
  ExpectProduct(x, w, {}, {}, y, rows, n, k, n);
}

TEST_F(OneDnnBf16MatmulTest, SharesThePanelsWhenItsLayoutIsOurs) {
  // AVX512_BF16's brgemm wants BA16a64b2a itself; AMX may want another (then a copy, checked
  // above).
  const int n = 256, k = 2048;
  const std::vector<uint16_t> panels = Pack(RandomBf16(static_cast<size_t>(n) * k), n, k, k);
  auto matmul = OneDnnBf16Matmul::Create(panels.data(), n, k, k, nullptr, false);
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  if ((*matmul)->impl_name() != "brg:avx512_core_bf16") {
    GTEST_SKIP() << "oneDNN runs " << (*matmul)->impl_name() << " here, not avx512_core_bf16";
  }
  EXPECT_TRUE((*matmul)->uses_caller_layout());
}

// With ONEDNN_MAX_CPU_ISA=AVX2, oneDNN has no bf16 matmul but its reference one, as on an
// AVX2-only CPU. oneDNN reads the variable once per process, so without it the test runs itself
// again in a process that has it.
TEST(OneDnnBf16MatmulIsaTest, RefusesToRunWithoutABf16Implementation) {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (isa == nullptr || std::string(isa) != "AVX2") {
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(len, 0);
    self[len] = '\0';
    const testing::CommandResult r = testing::RunCommand(
        {"/usr/bin/env", "ONEDNN_MAX_CPU_ISA=AVX2", self,
         "--gtest_filter=OneDnnBf16MatmulIsaTest.RefusesToRunWithoutABf16Implementation"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("[  PASSED  ] 1 test"), std::string::npos) << r.out;
    return;
  }
  const int n = 64, k = 64;
  const std::vector<uint16_t> panels(static_cast<size_t>(n) * k, 0);
  auto matmul = OneDnnBf16Matmul::Create(panels.data(), n, k, k, nullptr, false);
  EXPECT_EQ(matmul.status().code(), absl::StatusCode::kUnimplemented) << matmul.status();
}

TEST(RoundToBf16Test, EqualsFloatToBf16OnEveryKindOfFloat) {
  std::vector<float> x = {0.0f,       -0.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-140f,
                          -0x1p-149f, 3e38f, -INFINITY,      INFINITY,           NAN,
                          -NAN};
  std::mt19937 rng(7);
  // Random bit patterns, past the 1 << 16 that runs in parallel.
  while (x.size() < 70000) {
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  std::vector<uint16_t> out(x.size());
  RoundToBf16(x.data(), static_cast<int64_t>(x.size()), out.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(out[i], FloatToBf16(x[i])) << "x " << x[i] << " at " << i;
  }
}

}  // namespace
}  // namespace pagoda
