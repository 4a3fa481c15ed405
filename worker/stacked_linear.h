// Matrices stacked by rows into one output row (a fused q|k|v, gate|up): one Linear over all
// of them when they are stored in one dtype, else one Linear per matrix, each writing its own
// column range of the output row (Linear::Run's ldy). A checkpoint whose q, k and v have
// different types (a Q4_K_M file's Q6_K v) keeps each in the dtype its type calls for.
// Thread-compatible, as Linear.
#ifndef PAGODA_WORKER_STACKED_LINEAR_H_
#define PAGODA_WORKER_STACKED_LINEAR_H_

#include <memory>
#include <span>
#include <vector>

#include "common/model/tensor_view.h"
#include "worker/linear.h"

namespace pagoda {

class StackedLinear {
 public:
  // parts[i] stored as dtypes[i], bf16 ones multiplied in `compute` (Linear's); `bias`: (Σ rows)
  // or empty. REQUIRES: parts and dtypes of one size, not empty, parts of one cols.
  StackedLinear(std::span<const TensorView> parts, std::span<const WeightDtype> dtypes,
                const std::vector<float>& bias, bool accumulate,
                ComputeDtype compute = ComputeDtype::kF32);

  // y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y], as Linear::Run.
  void Run(const float* x, int rows, float* y) const;

  int out() const { return out_; }
  bool fused() const { return linears_.size() == 1; }
  const Linear& linear(int i) const { return *linears_[i].linear; }
  int num_linears() const { return static_cast<int>(linears_.size()); }
  size_t weight_bytes() const;
  size_t bias_bytes() const;

 private:
  struct Part {
    std::unique_ptr<Linear> linear;
    int column;  // of its first output in the stacked row
  };
  std::vector<Part> linears_;
  int out_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_STACKED_LINEAR_H_
