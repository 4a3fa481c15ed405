#include "worker/stacked_linear.h"

#include <algorithm>

#include "glog/logging.h"

namespace pagoda {

StackedLinear::StackedLinear(std::span<const TensorView> parts, std::span<const WeightDtype> dtypes,
                             const std::vector<float>& bias, bool accumulate,
                             ComputeDtype compute) {
  CHECK_EQ(parts.size(), dtypes.size());
  CHECK(!parts.empty());
  for (const TensorView& part : parts) out_ += static_cast<int>(part.rows);
  if (std::all_of(dtypes.begin(), dtypes.end(), [&](WeightDtype d) { return d == dtypes[0]; })) {
    linears_.push_back({std::make_unique<Linear>(parts, bias, accumulate, dtypes[0], compute), 0});
    return;
  }
  int column = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int rows = static_cast<int>(parts[i].rows);
    std::vector<float> part_bias;
    if (!bias.empty()) part_bias.assign(bias.begin() + column, bias.begin() + column + rows);
    linears_.push_back(
        {std::make_unique<Linear>(parts.subspan(i, 1), part_bias, accumulate, dtypes[i], compute),
         column});
    column += rows;
  }
}

void StackedLinear::Run(const float* x, int rows, float* y) const {
  for (const Part& part : linears_) part.linear->Run(x, rows, y + part.column, out_);
}

size_t StackedLinear::weight_bytes() const {
  size_t bytes = 0;
  for (const Part& part : linears_) bytes += part.linear->weight_bytes();
  return bytes;
}

size_t StackedLinear::bias_bytes() const {
  size_t bytes = 0;
  for (const Part& part : linears_) bytes += part.linear->bias_bytes();
  return bytes;
}

}  // namespace pagoda
