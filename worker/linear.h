// y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y], with W packed once at construction into
// panels for this CPU's GEMM kernel (worker/kernels/kernels.h: PackedShape), in huge pages.
// One kernel serves every row count: a decode (1 row) streams each panel once, like a GEMV; a
// batch of up to 12 (AVX-512) or 6 (AVX2) rows is one register tile per panel, and more rows
// reuse the panel from L2. docs/BENCHMARKS.md §6 has the measurements that chose it over
// oneDNN's matmul. The weights exist only in this layout (no second copy).
// Thread-compatible: Run() is const, splits the panels over the OpenMP threads, and must not
// run concurrently with itself.
#ifndef PAGODA_WORKER_LINEAR_H_
#define PAGODA_WORKER_LINEAR_H_

#include <vector>

#include "worker/huge_page_buffer.h"
#include "worker/kernels/kernels.h"

namespace pagoda {

class Linear {
 public:
  // `weight`: (out, in) row-major, as checkpoints store it (copied). `bias`: (out) or empty.
  // `accumulate`: add the product to what y already holds (the residual connection).
  // Packs for the kernels active now (worker/kernels/isa.h).
  Linear(const float* weight, int in, int out, const std::vector<float>& bias, bool accumulate);

  // REQUIRES: 0 < rows; x holds (rows, in) and y (rows, out), both dense row-major.
  void Run(const float* x, int rows, float* y) const;

  int in() const { return shape_.k; }
  int out() const { return shape_.n; }
  // Multiply-adds of one row: in · out.
  double flops_per_row() const { return 2.0 * shape_.k * shape_.n; }

 private:
  const Kernels& kernels_;  // the table the panels were packed for
  PackedShape shape_;
  bool accumulate_;
  HugePageBuffer packed_;    // shape_.num_floats()
  std::vector<float> bias_;  // (out) or empty
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LINEAR_H_
