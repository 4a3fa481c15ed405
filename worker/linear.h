// y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y]. The weight stays in the checkpoint's (out, in)
// row-major layout (oneDNN's `ba`), in huge pages:
//   rows >= kMinGemmRows: one oneDNN matmul primitive, created once with a run-time row count
//                         (measured here: ~100 GFLOP/s at 32 rows with weights out of cache,
//                         against ~62 with the layout oneDNN picks itself);
//   fewer rows (decode):  our own AVX2 GEMV, which streams each weight row once for all rows
//                         and is bound only by memory bandwidth.
// Thread-compatible: Run() is const but must not run concurrently on one stream.
#ifndef PAGODA_WORKER_LINEAR_H_
#define PAGODA_WORKER_LINEAR_H_

#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "worker/huge_page_buffer.h"

namespace pagoda {

class Linear {
 public:
  static constexpr int kMinGemmRows = 4;

  // `weight`: (out, in) row-major, as checkpoints store it (copied). `bias`: (out) or empty.
  // `accumulate`: add the product to what y already holds (the residual connection).
  Linear(const dnnl::engine& engine, const float* weight, int in, int out,
         const std::vector<float>& bias, bool accumulate);

  // REQUIRES: 0 < rows; x holds (rows, in) and y (rows, out), both dense row-major.
  void Run(dnnl::stream& stream, const float* x, int rows, float* y) const;

  int in() const { return in_; }
  int out() const { return out_; }

 private:
  void Gemv(const float* x, int rows, float* y) const;

  int in_, out_;
  bool accumulate_;
  dnnl::engine engine_;
  dnnl::matmul primitive_;
  HugePageBuffer weight_;    // (out, in)
  std::vector<float> bias_;  // (out) or empty
  dnnl::memory weight_mem_;  // wraps weight_ as the (in, out) matrix in layout `ba`
  dnnl::memory bias_mem_;    // (1, out), or empty
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LINEAR_H_
