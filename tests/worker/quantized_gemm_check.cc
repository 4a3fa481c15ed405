#include "tests/worker/quantized_gemm_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace pagoda::testing {
namespace {

// x as QuantizeRows left it in `qx` (tiles of int8_row_tile rows, kernels.h Int8TileBytes):
// row r, k kk as xq · xs.
double QuantizedX(const uint8_t* qx, const Kernels& kernels, int k_padded, int r, int kk) {
  const int tile = kernels.int8_row_tile, b = kk / 32, i = kk % 32;
  const uint8_t* block = qx + (r / tile) * Int8TileBytes(tile, k_padded) + b * 40 * tile;
  const int8_t q = static_cast<int8_t>(block[((i / 4) * tile + r % tile) * 4 + i % 4]);
  float scale;
  std::memcpy(&scale, block + 32 * tile + 4 * (r % tile), 4);
  return static_cast<double>(q) * scale;
}

}  // namespace

void CheckQuantizedGemm(const Kernels& kernels, GemmFn gemm, RowFn row, const PackedShape& shape,
                        const std::vector<uint8_t>& packed, std::mt19937& rng, bool ones_x) {
  std::normal_distribution<float> normal;
  std::vector<float> w(static_cast<size_t>(shape.n) * shape.k);
  for (int i = 0; i < shape.n; ++i) row(packed.data(), shape, i, &w[i * shape.k]);
  const int tile = kernels.int8_row_tile;
  for (const int rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 64}) {
    for (const int variant : {0, 1, 2, 3}) {
      const bool with_bias = variant & 1, accumulate = variant & 2;
      const int ldy = shape.n + 5;
      std::vector<float> x(static_cast<size_t>(rows) * shape.k), bias(shape.n);
      for (float& v : x) v = ones_x ? 1.0f : normal(rng);
      for (float& v : bias) v = normal(rng);
      const int tiles = (rows + tile - 1) / tile;
      std::vector<uint8_t> qx(tiles * Int8TileBytes(tile, shape.k_padded));
      kernels.quantize_rows(x.data(), rows, shape.k, shape.k_padded, 0, tiles, qx.data());
      std::vector<float> y0(static_cast<size_t>(rows) * ldy);
      for (float& v : y0) v = normal(rng);
      std::vector<float> y = y0;
      // Two calls over halves of the panels, as Linear splits them between threads.
      const int half = shape.num_panels() / 2;
      const float* b = with_bias ? bias.data() : nullptr;
      gemm(qx.data(), rows, packed.data(), shape, 0, half, b, accumulate, y.data(), ldy);
      gemm(qx.data(), rows, packed.data(), shape, half, shape.num_panels(), b, accumulate, y.data(),
           ldy);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < ldy; ++j) {
          const size_t at = static_cast<size_t>(r) * ldy + j;
          if (j >= shape.n) {
            ASSERT_EQ(y[at], y0[at]) << "past n: row " << r << " col " << j;
            continue;
          }
          double want = (with_bias ? bias[j] : 0.0) + (accumulate ? y0[at] : 0.0);
          double exact = want, magnitude = std::abs(want), rounding = 0;
          for (int b0 = 0; b0 < shape.k; b0 += 32) {
            double amax = 0, wsum = 0;
            for (int kk = b0; kk < std::min(shape.k, b0 + 32); ++kk) {
              const double wk = w[static_cast<size_t>(j) * shape.k + kk];
              const double xk = x[static_cast<size_t>(r) * shape.k + kk];
              const double p = QuantizedX(qx.data(), kernels, shape.k_padded, r, kk) * wk;
              want += p;
              exact += xk * wk;
              magnitude += std::abs(p);
              amax = std::max(amax, std::abs(xk));
              wsum += std::abs(wk);
            }
            // x rounded to a step of amax / 127: at most half a step per value.
            rounding += amax / 254 * wsum;
          }
          const std::string where = "rows " + std::to_string(rows) + ", row " + std::to_string(r) +
                                    ", col " + std::to_string(j) + (with_bias ? ", bias" : "") +
                                    (accumulate ? ", accumulating" : "");
          // f32 accumulation of the block sums (integer within a block).
          ASSERT_NEAR(y[at], want, 2e-6 * magnitude + 1e-6) << where;
          ASSERT_NEAR(y[at], exact, 1.001 * rounding + 2e-6 * magnitude + 1e-6) << where;
        }
      }
    }
  }
}

}  // namespace pagoda::testing
