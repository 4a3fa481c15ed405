// The q6_k weights (worker/q6k_pack.h, the gemm_q6k kernels) under every kernel table this CPU
// runs: Q6_K blocks of random bytes (any f16 d, any int8 scales) come back from Q6KRow bit for
// bit as llama.cpp dequantizes them; the panels take the file's bytes; the GEMM equals a float64
// product of those weights and of the activations as QuantizeRows rounds them; and Linear packs,
// reads and multiplies them.
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/model/ggml_quant.h"
#include "common/model/tensor_view.h"
#include "common/numeric.h"
#include "gtest/gtest.h"
#include "tests/worker/quantized_gemm_check.h"
#include "worker/kernels/isa.h"
#include "worker/kernels/kernels.h"
#include "worker/linear.h"
#include "worker/q6k_pack.h"

namespace pagoda {
namespace {

constexpr int kQ6KBytes = 210;  // a block of 256 values; its f16 d at byte 208

struct Tensor {
  std::vector<uint8_t> bytes;
  TensorView view;
};

class Q6KTest : public ::testing::TestWithParam<const Kernels*> {
 protected:
  const Kernels& kernels() const { return *GetParam(); }

  // Random bytes (any q, any int8 scale); d any finite f16 (subnormals and negatives too) when
  // `any_d`, else of magnitude within [0.0005, 0.005), either sign.
  Tensor Make(int rows, int cols, bool any_d) {
    Tensor t;
    t.bytes.resize(GgmlRowBytes(GgmlType::kQ6_K, cols) * rows);
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(rng_());
    std::uniform_real_distribution<float> modest(0.0005f, 0.005f);
    for (size_t at = 0; at < t.bytes.size(); at += kQ6KBytes) {
      uint16_t d;
      do {
        d = any_d ? static_cast<uint16_t>(rng_())
                  : FloatToHalf(rng_() % 2 ? modest(rng_) : -modest(rng_));
      } while ((d & 0x7C00) == 0x7C00);
      std::memcpy(&t.bytes[at + 208], &d, 2);
    }
    t.view = {.type = GgmlType::kQ6_K, .rows = rows, .cols = cols, .data = t.bytes.data()};
    return t;
  }

  std::vector<uint8_t> Pack(const std::vector<TensorView>& parts, const PackedShape& shape) {
    std::vector<uint8_t> packed(shape.num_bytes());
    for (int p = 0; p < shape.num_panels(); ++p) {
      PackQ6KPanel(parts, shape, p, packed.data() + p * shape.panel_bytes());
    }
    return packed;
  }

  std::mt19937 rng_{17};
};

std::vector<float> Dequantized(const std::vector<TensorView>& parts) {
  std::vector<float> out;
  for (const TensorView& p : parts) {
    std::vector<float> rows(p.rows * p.cols);
    DequantizeRows(p, 0, p.rows, rows.data());
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

TEST_P(Q6KTest, RowsAreLlamaCppsValuesBitForBit) {
  // Two parts stacked by rows, n not a multiple of the panel width, three blocks of 256.
  const Tensor a = Make(37, 768, true), b = Make(30, 768, true);
  const std::vector<TensorView> parts = {a.view, b.view};
  const PackedShape shape = Q6KShape(parts, kernels().int8_panel_width);
  const std::vector<uint8_t> packed = Pack(parts, shape);
  const std::vector<float> want = Dequantized(parts);
  std::vector<float> row(shape.k);
  for (int i = 0; i < shape.n; ++i) {
    Q6KRow(packed.data(), shape, i, row.data());
    for (int kk = 0; kk < shape.k; ++kk) {
      ASSERT_EQ(std::bit_cast<uint32_t>(row[kk]),
                std::bit_cast<uint32_t>(want[static_cast<size_t>(i) * shape.k + kk]))
          << "row " << i << ", k " << kk << ": " << row[kk] << " vs "
          << want[static_cast<size_t>(i) * shape.k + kk];
    }
  }
}

TEST_P(Q6KTest, MemoryIsTheFilesBytes) {
  const Tensor t = Make(2048, 2048, false);
  const PackedShape shape = Q6KShape({&t.view, 1}, kernels().int8_panel_width);
  EXPECT_EQ(shape.num_bytes(), t.bytes.size());
  // A last panel of 13 columns of 16 or 32: its missing columns are zeros.
  const Tensor u = Make(45, 256, false);
  const PackedShape padded = Q6KShape({&u.view, 1}, kernels().int8_panel_width);
  EXPECT_EQ(padded.num_bytes(),
            static_cast<size_t>(padded.num_panels()) * padded.panel_width * kQ6KBytes);
}

TEST_P(Q6KTest, PackingWritesEveryByteOfAPanel) {
  const Tensor t = Make(40, 512, false);
  const PackedShape shape = Q6KShape({&t.view, 1}, kernels().int8_panel_width);
  std::vector<uint8_t> zeroed(shape.panel_bytes(), 0), dirty(shape.panel_bytes(), 0xA5);
  PackQ6KPanel({&t.view, 1}, shape, 1, zeroed.data());
  PackQ6KPanel({&t.view, 1}, shape, 1, dirty.data());
  EXPECT_EQ(zeroed, dirty);
}

TEST_P(Q6KTest, GemmEqualsAFloat64Reference) {
  // n = 45 over two parts; k = 768: three headers.
  const Tensor a = Make(25, 768, false), b = Make(20, 768, false);
  const std::vector<TensorView> parts = {a.view, b.view};
  const PackedShape shape = Q6KShape(parts, kernels().int8_panel_width);
  testing::CheckQuantizedGemm(kernels(), kernels().gemm_q6k, &Q6KRow, shape, Pack(parts, shape),
                              rng_);
}

TEST_P(Q6KTest, GemmOfExtremeBlocksEqualsAFloat64Reference) {
  // Every q 0 or 63 and every scale −128 or 127, against activations all 127 once quantized:
  // the offset, the scales and AVX2's int16 sums at their limits.
  Tensor t = Make(33, 256, false);
  for (size_t at = 0; at < t.bytes.size(); at += kQ6KBytes) {
    for (int i = 0; i < 192; ++i) t.bytes[at + i] = (at / kQ6KBytes) % 2 ? 0xFF : 0x00;
    for (int i = 192; i < 208; ++i) t.bytes[at + i] = i % 3 ? 0x80 : 0x7F;
  }
  const PackedShape shape = Q6KShape({&t.view, 1}, kernels().int8_panel_width);
  testing::CheckQuantizedGemm(kernels(), kernels().gemm_q6k, &Q6KRow, shape, Pack({t.view}, shape),
                              rng_, /*ones_x=*/true);
}

TEST_P(Q6KTest, LinearKeepsTheBlocksAndRunsTheKernel) {
  const Kernels* previous = SetActiveKernelsForTesting(GetParam());
  const Tensor a = Make(20, 512, false), b = Make(19, 512, false);
  const std::vector<TensorView> parts = {a.view, b.view};
  std::normal_distribution<float> normal;
  std::vector<float> bias(39);
  for (float& v : bias) v = normal(rng_);
  const Linear linear(parts, bias, /*accumulate=*/true, WeightDtype::kQ6K);
  EXPECT_EQ(linear.dtype(), WeightDtype::kQ6K);
  EXPECT_EQ(linear.in(), 512);
  EXPECT_EQ(linear.out(), 39);
  // Two blocks of 256 a column, 39 columns in panels of int8_panel_width.
  const int pw = kernels().int8_panel_width;
  EXPECT_EQ(linear.weight_bytes(), static_cast<size_t>((39 + pw - 1) / pw) * pw * 2 * kQ6KBytes);

  const std::vector<float> want = Dequantized(parts);
  std::vector<float> row(512);
  for (int i = 0; i < linear.out(); ++i) {
    linear.Row(i, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), &want[static_cast<size_t>(i) * 512], 512 * 4)) << i;
  }

  // Run: bias and the residual added to what the kernel gives for the same quantized x.
  const int rows = 5;
  std::vector<float> x(rows * 512), y0(rows * 39);
  for (float& v : x) v = normal(rng_);
  for (float& v : y0) v = normal(rng_);
  std::vector<float> y = y0, want_y = y0;
  linear.Run(x.data(), rows, y.data());
  const PackedShape shape = Q6KShape(parts, kernels().int8_panel_width);
  const std::vector<uint8_t> packed = Pack(parts, shape);
  const int tile = kernels().int8_row_tile, tiles = (rows + tile - 1) / tile;
  std::vector<uint8_t> qx(tiles * Int8TileBytes(tile, 512));
  kernels().quantize_rows(x.data(), rows, 512, 512, 0, tiles, qx.data());
  kernels().gemm_q6k(qx.data(), rows, packed.data(), shape, 0, shape.num_panels(), bias.data(),
                     true, want_y.data(), 39);
  EXPECT_EQ(y, want_y);
  SetActiveKernelsForTesting(previous);
}

INSTANTIATE_TEST_SUITE_P(Isa, Q6KTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace pagoda
