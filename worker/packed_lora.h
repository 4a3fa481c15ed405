// A LoRA adapter's matrices packed for the GEMM kernels, each A and B a Linear in f32 or bf16, the
// scale folded into B (B' = scale · B), so a target's update over some rows of a step is two
// small GEMMs: t (n, rank) = x · Aᵀ, then y += t · B'ᵀ. LlamaModel runs it per adapter over that
// adapter's rows after the base matmul ran over all of them (issue 39 item 3).
// Immutable after construction; Run calls are const and, as Linear's, not concurrent.
#ifndef PAGODA_WORKER_PACKED_LORA_H_
#define PAGODA_WORKER_PACKED_LORA_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/model/lora_adapter.h"
#include "worker/linear.h"

namespace pagoda {

// The largest rank a packed adapter may have: LlamaModel's scratch holds this many columns.
inline constexpr int kMaxLoraRank = 256;
// Adapters LlamaModel runs side by side in one step (more run one after another).
inline constexpr int kMaxLorasPerStep = 64;

// Buffers LlamaModel lends Apply, each at least (rows, width) floats as noted.
struct LoraScratch {
  float* x;  // (rows, in) the rows of an adapter gathered
  float* t;  // (rows, kMaxLoraRank)
  float* y;  // (rows, out) the rows of the output gathered
};

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
    return layers_[layer][static_cast<int>(target)].a != nullptr;
  }
  // For each row r of `rows` (ascending, distinct): y[r · ldy + j] += Σ_k t[k] · B'[j][k], with
  // t = A · x[r · in ...], j < out of `target`. x is (any, in) dense; y's row r starts at
  // y + r · ldy. A no-op where the adapter leaves the target alone.
  void Apply(int layer, LoraTarget target, const float* x, std::span<const int> rows, float* y,
             int ldy, const LoraScratch& scratch) const;
  // Bytes of the packed matrices.
  size_t weight_bytes() const;

 private:
  struct Pair {
    std::unique_ptr<Linear> a;  // in -> rank
    std::unique_ptr<Linear> b;  // rank -> out, scaled, accumulating
  };
  int rank_;
  std::vector<std::array<Pair, kNumLoraTargets>> layers_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_PACKED_LORA_H_
