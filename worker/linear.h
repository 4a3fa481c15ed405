// y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y], one oneDNN matmul primitive per weight.
// The primitive is created once with a run-time row count; the weight is reordered once, at
// construction, into the layout oneDNN prefers. Thread-compatible: Run() is const but callers
// must not run the same Linear concurrently on one stream.
#ifndef PAGODA_WORKER_LINEAR_H_
#define PAGODA_WORKER_LINEAR_H_

#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace pagoda {

class Linear {
 public:
  // `weight`: (out, in) row-major, as checkpoints store it. `bias`: (out) or empty.
  // `accumulate`: add the product to what y already holds (the residual connection).
  Linear(const dnnl::engine& engine, const float* weight, int in, int out,
         const std::vector<float>& bias, bool accumulate);

  // REQUIRES: 0 < rows; x holds (rows, in) and y (rows, out), both dense row-major.
  void Run(dnnl::stream& stream, const float* x, int rows, float* y) const;

  int in() const { return in_; }
  int out() const { return out_; }

 private:
  int in_, out_;
  dnnl::engine engine_;
  dnnl::matmul primitive_;
  dnnl::memory weight_;  // in the primitive's preferred layout
  dnnl::memory bias_;    // (1, out), or empty
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LINEAR_H_
