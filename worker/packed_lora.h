// A LoRA adapter's matrices, each target's A (rank, in) and B' = scale · Bᵀ (rank, out) stored
// row-major and unpadded in f32 or bf16, so a target's update over some rows of a step is two
// small products (the kernels' lora_shrink and lora_expand): t (n, rank) = x · Aᵀ, then
// y += t · B'. LlamaModel runs it per adapter over that adapter's rows after the base matmul ran
// over all of them (issue 39 item 3). An adapter reads exactly rank · (in + out) values a
// target: Linear's panels padded the rank (to the panel's width in A, to 32 in B), which on
// AVX-512 doubled the bytes a step read.
// Immutable after construction; Apply is const and may run concurrently over disjoint rows and
// scratch.
#ifndef PAGODA_WORKER_PACKED_LORA_H_
#define PAGODA_WORKER_PACKED_LORA_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/model/lora_adapter.h"
#include "common/model/model_config.h"
#include "worker/kernels/kernels.h"

namespace pagoda {

// The largest rank a packed adapter may have: LlamaModel's scratch holds this many columns.
inline constexpr int kMaxLoraRank = 256;
// Adapters LlamaModel runs side by side in one step (more run one after another).
inline constexpr int kMaxLorasPerStep = 64;

class PackedLora {
 public:
  // REQUIRES: adapter.rank in [1, kMaxLoraRank], its pairs the shapes of `config`'s targets
  // (ReadLoraAdapter checked both). `dtype`: kF32 or kBf16 (A and B' rounded to bf16, half the
  // bytes a step reads; the products stay exact f32 ones of the rounded values).
  PackedLora(const LoraAdapter& adapter, const ModelConfig& config,
             WeightDtype dtype = WeightDtype::kF32);

  int rank() const { return rank_; }
  // Whether the adapter updates `target` of `layer`.
  bool Has(int layer, LoraTarget target) const {
    return layers_[layer][static_cast<int>(target)].a.data != nullptr;
  }
  // For each row r of `rows` (distinct): y[r · ldy + j] += Σ_k t[k] · B'[k][j], with
  // t = A · x[r · in ...], j < out of `target`. x is (any, in) dense; y's row r starts at
  // y + r · ldy. `t`: scratch of rows.size() · rank() floats. Splits its work over the OpenMP
  // threads unless called inside a parallel region. A no-op where the adapter leaves the target
  // alone.
  void Apply(int layer, LoraTarget target, const float* x, std::span<const int> rows, float* y,
             int ldy, float* t) const;
  // Bytes of the packed matrices.
  size_t weight_bytes() const;

 private:
  struct Pair {
    LoraMatrix a;  // (rank, in)
    LoraMatrix b;  // (rank, out): scale · Bᵀ
  };
  int rank_;
  bool bf16_;
  std::vector<std::array<Pair, kNumLoraTargets>> layers_;  // views of the values below
  // Every matrix back to back, in f32 or (bf16_) in bf16.
  std::vector<float> f32_values_;
  std::vector<uint16_t> bf16_values_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_PACKED_LORA_H_
