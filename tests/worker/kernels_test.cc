// Every kernel table this CPU can run, against float64 references: RMSNorm and SwiGLU, and
// QuantizeRows against its contract (kernels.h) value by value. Linear (packing + GEMM, every
// precision) and paged attention have their own tests, which run each table too.

#include "worker/kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// Each row and block of 32: scale amax / 127, q = x · 127 / amax rounded to nearest even and
// clamped to ±127 (0 past k and in the rows past `rows`), offset −128 · Σ q; words of 4 k of a
// row at word (kk / 4) · tile + r of the block (kernels.h, Int8TileBytes).
TEST_P(KernelsTest, QuantizeRowsStoresEachBlocksRoundedValues) {
  const int tile = kernels().int8_row_tile;
  for (const int k : {32, 64, 70, 2048}) {
    for (const int rows : {1, 2, tile + 1}) {
      const int k_padded = (k + 31) / 32 * 32, tiles = (rows + tile - 1) / tile;
      std::vector<float> x = Random(static_cast<size_t>(rows) * k);
      std::fill(x.begin(), x.begin() + std::min(k, 32), 0.0f);  // an all-zero block
      x[x.size() - 1] = 1e-30f;                                 // a block of tiny values
      std::vector<uint8_t> packed(tiles * Int8TileBytes(tile, k_padded), 0xAA);
      kernels().quantize_rows(x.data(), rows, k, k_padded, 0, tiles, packed.data());
      for (int r = 0; r < tiles * tile; ++r) {
        for (int b = 0; b < k_padded / 32; ++b) {
          const uint8_t* block = packed.data() + (r / tile) * Int8TileBytes(tile, k_padded) +
                                 static_cast<size_t>(b) * 40 * tile;
          const int n = r < rows ? std::min(32, k - 32 * b) : 0;
          const float* src = x.data() + static_cast<size_t>(r) * k + 32 * b;
          float amax = 0.0f;
          for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
          const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
          int32_t sum = 0;
          for (int i = 0; i < 32; ++i) {
            const int want = i < n ? static_cast<int>(std::clamp(std::nearbyint(src[i] * inverse),
                                                                 -127.0f, 127.0f))
                                   : 0;
            sum += want;
            const int got = static_cast<int8_t>(block[((i / 4) * tile + r % tile) * 4 + i % 4]);
            ASSERT_EQ(got, want) << "k " << k << " rows " << rows << " row " << r << " block " << b
                                 << " at " << i;
          }
          float scale;
          int32_t offset;
          std::memcpy(&scale, block + 32 * tile + 4 * (r % tile), 4);
          std::memcpy(&offset, block + 36 * tile + 4 * (r % tile), 4);
          EXPECT_EQ(scale, amax / 127.0f) << "row " << r << " block " << b;
          EXPECT_EQ(offset, -128 * sum) << "row " << r << " block " << b;
        }
      }
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
