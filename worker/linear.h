// y (rows, out) = x (rows, in) · Wᵀ [+ b] [+ y], with W packed once at construction into
// panels for this CPU's GEMM kernels (worker/kernels/kernels.h: PackedShape), in huge pages, in
// one of three precisions:
//   f32   as given;
//   bf16  rounded to nearest even (exact for a bf16 checkpoint), widened to f32 in the kernel,
//         or, with bf16 compute where the CPU has AVX512_BF16, packed in pairs along `in` and
//         multiplied by x rounded to bf16 (vdpbf16ps, f32 sums): twice the f32 kernel's work
//         per instruction, for batched steps;
//   int8  blocks of 32 along `in`, one f16 scale per output and block (Q8_0's layout and
//         rounding); each call quantizes x the same way per row and multiplies in integers.
// It is packed from TensorViews of the checkpoint (stacked by rows: a fused q|k|v), panel by
// panel in parallel, decoding only one panel's rows at a time: a quantized file never exists
// widened in memory. An int8 matrix from a Q8_0 tensor keeps its blocks exactly.
// One kernel serves every row count: a decode (1 row) streams each panel once, like a GEMV; a
// batch of up to 12 (AVX-512) or 6 (AVX2) rows is one register tile per panel, and more rows
// reuse the panel from L2. docs/BENCHMARKS.md §6 has the measurements that chose it over
// oneDNN's matmul for f32 and int8. bf16 compute has two engines over the same panels (oneDNN
// reads our layout in place): ours and oneDNN's brgemm, chosen per row count by
// Bf16MatmulEngine (§17 measured them). The weights exist only in this layout (no second copy).
// Thread-compatible: Run() is const, splits the panels over the OpenMP threads, and must not
// run concurrently with itself.
#ifndef PAGODA_WORKER_LINEAR_H_
#define PAGODA_WORKER_LINEAR_H_

#include <memory>
#include <span>
#include <vector>

#include "common/model/tensor_view.h"
#include "worker/huge_page_buffer.h"
#include "worker/kernels/kernels.h"
#include "worker/onednn_matmul.h"

namespace pagoda {

// Which engine multiplies a bf16-compute matrix (both read the same panels).
enum class MatmulEngine { kOurs, kOneDnn };
// The engine for `rows` rows: PAGODA_MATMUL=ours|onednn forces one (read once, logged);
// otherwise the measured winner of each row class (docs/BENCHMARKS.md §17).
MatmulEngine Bf16MatmulEngine(int rows);

class Linear {
 public:
  // W (out, in) is `parts` stacked by rows: out = Σ rows, in = their cols (copied).
  // `bias`: (out) or empty. `accumulate`: add the product to what y already holds (the
  // residual connection). Packs for the kernels active now (worker/kernels/isa.h).
  // `compute`: what bf16 weights are multiplied in (other dtypes ignore it): kBf16 or kAuto
  // multiply in bf16 where the table has gemm_bf16dot (the CPU has AVX512_BF16); elsewhere
  // kBf16 falls back to f32 (logged once) and kAuto chooses it quietly.
  // REQUIRES: parts not empty, all of one cols, out and in below 2^31 (the caller checks files).
  Linear(std::span<const TensorView> parts, const std::vector<float>& bias, bool accumulate,
         WeightDtype dtype, ComputeDtype compute = ComputeDtype::kF32);
  // `weight`: (out, in) row-major f32.
  Linear(const float* weight, int in, int out, const std::vector<float>& bias, bool accumulate,
         WeightDtype dtype = WeightDtype::kF32, ComputeDtype compute = ComputeDtype::kF32);

  // REQUIRES: 0 < rows; x holds (rows, in), dense; row r of y is y + r·ldy, `out` wide
  // (ldy 0: out; a larger ldy writes a column range of a wider buffer).
  void Run(const float* x, int rows, float* y, int ldy = 0) const;

  // Row i of W as stored (after rounding): an embedding table's lookup. REQUIRES: i < out.
  void Row(int i, float* out) const;

  int in() const { return shape_.k; }
  int out() const { return shape_.n; }
  WeightDtype dtype() const { return shape_.dtype; }
  // Whether Run multiplies in bf16 (the weights in PackedShape::compute_bf16's layout).
  bool compute_bf16() const { return shape_.compute_bf16; }
  // The packed weights and their shape: with compute_bf16, oneDNN's BA16a64b2a of Wᵀ
  // (worker/kernels/kernels.h), k_padded × 64·num_panels bf16 values.
  const PackedShape& packed_shape() const { return shape_; }
  const uint16_t* bf16_panels() const { return reinterpret_cast<const uint16_t*>(packed_.data()); }
  size_t weight_bytes() const { return shape_.num_bytes(); }
  size_t bias_bytes() const { return sizeof(float) * bias_.size(); }
  // Multiply-adds of one row: in · out.
  double flops_per_row() const { return 2.0 * shape_.k * shape_.n; }

 private:
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(packed_.data()); }
  // Index of element (kk, j) in a panel of the compute_bf16 layout.
  static size_t Bf16PairIndex(int kk, int j) {
    return static_cast<size_t>(kk / 2) * 2 * PackedShape::kBf16Panel + 2 * j + kk % 2;
  }
  // Run with compute_bf16: x rounded to bf16 pairs, then gemm_bf16dot.
  void RunBf16(const float* x, int rows, float* y, int ldy) const;
  // Packs column j of panel `panel` (row p·panel_width + j of W) from f32 values `w` (in).
  void PackColumn(uint8_t* panel, int j, const float* w) const;
  // The same from a Q8_0 row (int8 only): its blocks as they are.
  void PackQ8Column(uint8_t* panel, int j, const uint8_t* q8_row) const;
  // Stores one block of 32 int8 weights and their f16 scale at column j of an int8 panel.
  void StoreInt8Block(uint8_t* panel, int block, int j, uint16_t scale, const int8_t* q,
                      int n) const;

  const Kernels& kernels_;  // the table the panels were packed for
  PackedShape shape_;
  bool accumulate_;
  HugePageBuffer packed_;    // shape_.num_bytes(), as floats
  std::vector<float> bias_;  // (out) or empty
  // bf16 compute: oneDNN's matmul over packed_ (null where oneDNN cannot read it in place).
  std::unique_ptr<OneDnnBf16Matmul> onednn_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LINEAR_H_
