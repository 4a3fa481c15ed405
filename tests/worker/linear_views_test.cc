// Linear packed from TensorViews (a checkpoint's tensors as stored, stacked by rows) under every
// kernel table this CPU runs: it computes bit for bit what a Linear packed from the same values
// widened to f32 computes, in f32, bf16 and int8; a Q8_0 tensor becomes int8 without a rounding;
// a StackedLinear of parts in different dtypes writes each part's columns as its own Linear does.
#include <array>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/model/tensor_view.h"
#include "gtest/gtest.h"
#include "tests/common/model/gguf_writer.h"
#include "worker/kernels/isa.h"
#include "worker/linear.h"
#include "worker/stacked_linear.h"

namespace pagoda {
namespace {

constexpr int kIn = 96;
constexpr std::array<int, 3> kPartRows = {30, 25, 15};  // 70 rows: a partial last panel

// Parts of random values encoded as `type`, the bytes kept alive by the test.
struct Parts {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorView> views;
  std::vector<float> widened;  // (Σ rows, kIn): the parts' values as f32, stacked
};

Parts MakeParts(const std::vector<GgmlType>& types, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  Parts p;
  p.bytes.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    std::vector<float> values(static_cast<size_t>(kPartRows[i]) * kIn);
    for (float& v : values) v = normal(rng);
    p.bytes.push_back(testing::EncodeGgml(values, types[i]));
    const TensorView view{
        .type = types[i], .rows = kPartRows[i], .cols = kIn, .data = p.bytes.back().data()};
    p.views.push_back(view);
    const size_t at = p.widened.size();
    p.widened.resize(at + values.size());
    DequantizeRows(view, 0, view.rows, &p.widened[at]);
  }
  return p;
}

std::vector<float> Apply(const Linear& linear, const std::vector<float>& x, int rows) {
  std::vector<float> y(static_cast<size_t>(rows) * linear.out(), 1.0f);
  linear.Run(x.data(), rows, y.data());
  return y;
}

using Param = std::tuple<const Kernels*, WeightDtype, GgmlType>;

class LinearViewsTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { previous_ = SetActiveKernelsForTesting(std::get<0>(GetParam())); }
  void TearDown() override { SetActiveKernelsForTesting(previous_); }
  const Kernels* previous_ = nullptr;
  std::mt19937 rng_{11};
};

TEST_P(LinearViewsTest, StackedViewsComputeWhatTheirWidenedValuesCompute) {
  const WeightDtype dtype = std::get<1>(GetParam());
  const GgmlType type = std::get<2>(GetParam());
  const Parts p = MakeParts({type, type, type}, rng_);
  std::vector<float> bias(p.widened.size() / kIn);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
  const Linear from_views(p.views, bias, /*accumulate=*/true, dtype);
  const Linear from_floats(p.widened.data(), kIn, static_cast<int>(bias.size()), bias, true, dtype);
  ASSERT_EQ(from_views.out(), 70);
  std::normal_distribution<float> normal;
  for (int rows : {1, 5, 13, 40}) {
    std::vector<float> x(static_cast<size_t>(rows) * kIn);
    for (float& v : x) v = normal(rng_);
    EXPECT_EQ(Apply(from_views, x, rows), Apply(from_floats, x, rows)) << rows << " rows";
  }
}

// Every kernel table, dtype and stored type, but Q8_0 into int8, which keeps the file's own
// blocks rather than rounding its widened values (Q8_0IntoInt8IsExact checks it).
std::vector<Param> ViewParams() {
  std::vector<Param> params;
  for (const Kernels* kernels : SupportedKernels()) {
    for (WeightDtype dtype : {WeightDtype::kF32, WeightDtype::kBf16, WeightDtype::kInt8}) {
      for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0}) {
        if (dtype != WeightDtype::kInt8 || type != GgmlType::kQ8_0) {
          params.emplace_back(kernels, dtype, type);
        }
      }
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(
    IsaDtypeType, LinearViewsTest, ::testing::ValuesIn(ViewParams()),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(std::get<0>(info.param)->name) + "_" +
             WeightDtypeName(std::get<1>(info.param)) + "_from_" +
             FindGgmlType(static_cast<uint32_t>(std::get<2>(info.param)))->name;
    });

class LinearViewsIsaTest : public ::testing::TestWithParam<const Kernels*> {
 protected:
  void SetUp() override { previous_ = SetActiveKernelsForTesting(GetParam()); }
  void TearDown() override { SetActiveKernelsForTesting(previous_); }
  const Kernels* previous_ = nullptr;
  std::mt19937 rng_{5};
};

TEST_P(LinearViewsIsaTest, Q8_0IntoInt8IsExact) {
  const Parts p = MakeParts({GgmlType::kQ8_0, GgmlType::kQ8_0}, rng_);
  const Linear linear(p.views, {}, false, WeightDtype::kInt8);
  std::vector<float> row(kIn);
  for (int o = 0; o < linear.out(); ++o) {
    linear.Row(o, row.data());
    for (int i = 0; i < kIn; ++i) {
      ASSERT_EQ(row[i], p.widened[static_cast<size_t>(o) * kIn + i]) << o << ", " << i;
    }
  }
}

TEST_P(LinearViewsIsaTest, MixedDtypesWriteEachPartsColumnsAsItsOwnLinearDoes) {
  const Parts p = MakeParts({GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kBF16}, rng_);
  const std::array<WeightDtype, 3> dtypes = {WeightDtype::kF32, WeightDtype::kInt8,
                                             WeightDtype::kBf16};
  std::vector<float> bias(70);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.5f - 0.01f * static_cast<float>(i);
  const StackedLinear stacked(p.views, dtypes, bias, /*accumulate=*/false);
  EXPECT_FALSE(stacked.fused());
  EXPECT_EQ(stacked.out(), 70);
  std::normal_distribution<float> normal;
  for (int rows : {1, 7, 30}) {
    std::vector<float> x(static_cast<size_t>(rows) * kIn);
    for (float& v : x) v = normal(rng_);
    std::vector<float> y(static_cast<size_t>(rows) * 70, -1.0f);
    stacked.Run(x.data(), rows, y.data());
    int column = 0;
    for (size_t i = 0; i < p.views.size(); ++i) {
      const int n = static_cast<int>(p.views[i].rows);
      const std::vector<float> part_bias(bias.begin() + column, bias.begin() + column + n);
      const Linear alone(std::span<const TensorView>(&p.views[i], 1), part_bias, false, dtypes[i]);
      const std::vector<float> want = Apply(alone, x, rows);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < n; ++j) {
          ASSERT_EQ(y[static_cast<size_t>(r) * 70 + column + j],
                    want[static_cast<size_t>(r) * n + j])
              << "part " << i << " row " << r << " column " << j;
        }
      }
      column += n;
    }
  }
}

TEST_P(LinearViewsIsaTest, PartsOfOneDtypeStayFused) {
  const Parts p = MakeParts({GgmlType::kF32, GgmlType::kF16, GgmlType::kF32}, rng_);
  const std::array<WeightDtype, 3> dtypes = {WeightDtype::kF32, WeightDtype::kF32,
                                             WeightDtype::kF32};
  EXPECT_TRUE(StackedLinear(p.views, dtypes, {}, false).fused());
}

INSTANTIATE_TEST_SUITE_P(Isa, LinearViewsIsaTest, ::testing::ValuesIn(SupportedKernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace pagoda
