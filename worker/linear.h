// y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y], with W packed once at construction into
// panels for this CPU's GEMM kernels (worker/kernels/kernels.h: PackedShape), in huge pages, in
// one of three precisions:
//   f32   as given;
//   bf16  rounded to nearest even (exact for a bf16 checkpoint), widened to f32 in the kernel;
//   int8  blocks of 32 along `in`, one f16 scale per output and block (Q8_0's layout and
//         rounding); each call quantizes x the same way per row and multiplies in integers.
// One kernel serves every row count: a decode (1 row) streams each panel once, like a GEMV; a
// batch of up to 12 (AVX-512) or 6 (AVX2) rows is one register tile per panel, and more rows
// reuse the panel from L2. docs/BENCHMARKS.md §6 has the measurements that chose it over
// oneDNN's matmul. The weights exist only in this layout (no second copy).
// Thread-compatible: Run() is const, splits the panels over the OpenMP threads, and must not
// run concurrently with itself.
#ifndef PAGODA_WORKER_LINEAR_H_
#define PAGODA_WORKER_LINEAR_H_

#include <span>
#include <vector>

#include "common/model/tensor_view.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/kernels.h"

namespace pagoda {

class Linear {
 public:
  // `weight`: (out, in) row-major, as checkpoints store it (copied). `bias`: (out) or empty.
  // `accumulate`: add the product to what y already holds (the residual connection).
  // Packs for the kernels active now (worker/kernels/isa.h).
  Linear(const float* weight, int in, int out, const std::vector<float>& bias, bool accumulate,
         WeightDtype dtype = WeightDtype::kF32);

  // q6_k (the branch q6k-kernels; the views constructor of weights-load takes this case):
  // W (out, in) is `parts` stacked by rows, their Q6_K blocks kept exactly
  // (worker/q6k_pack.h). REQUIRES: dtype is kQ6K and CanPackQ6K(parts).
  Linear(std::span<const TensorView> parts, const std::vector<float>& bias, bool accumulate,
         WeightDtype dtype);

  // REQUIRES: 0 < rows; x holds (rows, in) and y (rows, out), both dense row-major.
  void Run(const float* x, int rows, float* y) const;

  // Row i of W as stored (after rounding): an embedding table's lookup. REQUIRES: i < out.
  void Row(int i, float* out) const;

  int in() const { return shape_.k; }
  int out() const { return shape_.n; }
  WeightDtype dtype() const { return shape_.dtype; }
  size_t weight_bytes() const { return shape_.num_bytes(); }
  size_t bias_bytes() const { return sizeof(float) * bias_.size(); }
  // Multiply-adds of one row: in · out.
  double flops_per_row() const { return 2.0 * shape_.k * shape_.n; }

 private:
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(packed_.data()); }

  const Kernels& kernels_;  // the table the panels were packed for
  PackedShape shape_;
  bool accumulate_;
  HugePageBuffer packed_;    // shape_.num_bytes(), as floats
  std::vector<float> bias_;  // (out) or empty
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LINEAR_H_
