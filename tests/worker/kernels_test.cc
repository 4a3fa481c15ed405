// Every kernel table this CPU can run, against float64 references: RMSNorm, SwiGLU and LoRA's
// two products, and QuantizeRows against its contract (kernels.h) value by value. Linear (packing +
// GEMM, every precision) and paged attention have their own tests, which run each table too.

#include "worker/kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
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

// LoRA's shrink and expand over scattered rows, in f32 and bf16, at ranks and widths that leave
// tails (odd ranks, columns past the last vector), split as PackedLora splits them between
// threads: each against a float64 reference, each row the same bits as when it runs alone, and
// rows not named untouched.
TEST_P(KernelsTest, LoraShrinkAndExpandEqualAFloat64ReferenceRowByRow) {
  const auto bf16_round = [](float v) {  // the bf16 a matrix stores, as FloatToBf16 rounds
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
    std::memcpy(&v, &bits, 4);
    return v;
  };
  for (const bool bf16 : {false, true}) {
    for (const auto& [rank, in, out] :
         {std::tuple{1, 5, 3}, {7, 64, 172}, {16, 2048, 256}, {8, 172, 100}}) {
      std::vector<float> a = Random(static_cast<size_t>(rank) * in);
      std::vector<float> b = Random(static_cast<size_t>(rank) * out);
      std::vector<uint16_t> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = bf16 ? bf16_round(a[i]) : a[i];
        uint32_t bits;
        std::memcpy(&bits, &a[i], 4);
        a16[i] = static_cast<uint16_t>(bits >> 16);
      }
      for (size_t i = 0; i < b.size(); ++i) {
        b[i] = bf16 ? bf16_round(b[i]) : b[i];
        uint32_t bits;
        std::memcpy(&bits, &b[i], 4);
        b16[i] = static_cast<uint16_t>(bits >> 16);
      }
      const LoraMatrix am{bf16 ? static_cast<const void*>(a16.data()) : a.data(), rank, in, bf16};
      const LoraMatrix bm{bf16 ? static_cast<const void*>(b16.data()) : b.data(), rank, out, bf16};
      const int total_rows = 11, ldy = out + 3;
      const std::vector<float> x = Random(static_cast<size_t>(total_rows) * in);
      const std::vector<float> y0 = Random(static_cast<size_t>(total_rows) * ldy);
      const std::vector<int> rows = {9, 0, 2, 3, 4, 7, 10};  // any order, gaps between
      const int n = static_cast<int>(rows.size());
      std::vector<float> t(static_cast<size_t>(n) * rank), y = y0;
      kernels().lora_shrink(am, x.data(), in, rows.data(), n, 0, rank / 2, t.data());
      kernels().lora_shrink(am, x.data(), in, rows.data(), n, rank / 2, rank, t.data());
      kernels().lora_expand(bm, t.data(), rows.data(), n, 0, std::min(out, 32), y.data(), ldy);
      kernels().lora_expand(bm, t.data(), rows.data(), n, std::min(out, 32), out, y.data(), ldy);
      const std::string what = std::string(bf16 ? "bf16" : "f32") + " rank " +
                               std::to_string(rank) + " in " + std::to_string(in) + " out " +
                               std::to_string(out);
      for (int i = 0; i < n; ++i) {
        for (int k = 0; k < rank; ++k) {
          double want = 0;
          for (int c = 0; c < in; ++c) {
            want += static_cast<double>(x[static_cast<size_t>(rows[i]) * in + c]) *
                    a[static_cast<size_t>(k) * in + c];
          }
          ASSERT_NEAR(t[static_cast<size_t>(i) * rank + k], want, 1e-4 * std::sqrt(in)) << what;
        }
        for (int j = 0; j < out; ++j) {
          double want = y0[static_cast<size_t>(rows[i]) * ldy + j];
          for (int k = 0; k < rank; ++k) {
            want += static_cast<double>(t[static_cast<size_t>(i) * rank + k]) *
                    b[static_cast<size_t>(k) * out + j];
          }
          ASSERT_NEAR(y[static_cast<size_t>(rows[i]) * ldy + j], want, 1e-4 * (1 + rank)) << what;
        }
        // Alone, the row's t and y are the same bits.
        std::vector<float> t1(rank), y1 = y0;
        kernels().lora_shrink(am, x.data(), in, &rows[i], 1, 0, rank, t1.data());
        kernels().lora_expand(bm, t1.data(), &rows[i], 1, 0, out, y1.data(), ldy);
        for (int k = 0; k < rank; ++k) {
          ASSERT_EQ(t1[k], t[static_cast<size_t>(i) * rank + k]) << what << " row " << rows[i];
        }
        for (int j = 0; j < out; ++j) {
          const size_t at = static_cast<size_t>(rows[i]) * ldy + j;
          ASSERT_EQ(y1[at], y[at]) << what << " row " << rows[i] << " column " << j;
        }
      }
      for (const int untouched : {1, 5, 6, 8}) {  // rows not named, and columns past out
        for (int j = 0; j < ldy; ++j) {
          const size_t at = static_cast<size_t>(untouched) * ldy + j;
          ASSERT_EQ(y[at], y0[at]) << what << " row " << untouched;
        }
      }
      for (const int r : rows) {
        for (int j = out; j < ldy; ++j) {
          const size_t at = static_cast<size_t>(r) * ldy + j;
          ASSERT_EQ(y[at], y0[at]) << what << " row " << r << " column " << j;
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
