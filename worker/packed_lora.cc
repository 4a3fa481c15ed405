#include "worker/packed_lora.h"

#include <omp.h>

#include <algorithm>

#include "common/dtype_names.h"
#include "common/numeric.h"
#include "glog/logging.h"
#include "worker/kernels/isa.h"

namespace pagoda {

PackedLora::PackedLora(const LoraAdapter& adapter, const ModelConfig& config, WeightDtype dtype)
    : rank_(adapter.rank), bf16_(dtype == WeightDtype::kBf16), layers_(adapter.layers.size()) {
  CHECK(rank_ >= 1 && rank_ <= kMaxLoraRank) << "rank " << rank_;
  CHECK(dtype == WeightDtype::kF32 || dtype == WeightDtype::kBf16) << WeightDtypeName(dtype);
  CHECK_EQ(static_cast<int>(adapter.layers.size()), config.num_layers);
  // Sizes first, so the views below stay valid: A then B' of each target, back to back.
  size_t total = 0;
  for (const auto& layer : adapter.layers) {
    for (const LoraPair& pair : layer) total += pair.a.size() + pair.b.size();
  }
  if (bf16_) {
    bf16_values_.resize(total);
  } else {
    f32_values_.resize(total);
  }
  size_t at = 0;
  // Stores value v at element i of the matrix that starts at `at`.
  const auto put = [&](size_t i, float v) {
    if (bf16_) {
      bf16_values_[at + i] = FloatToBf16(v);
    } else {
      f32_values_[at + i] = v;
    }
  };
  const auto view = [&](int rows, int cols) {
    const void* data = bf16_ ? static_cast<const void*>(bf16_values_.data() + at)
                             : static_cast<const void*>(f32_values_.data() + at);
    at += static_cast<size_t>(rows) * cols;
    return LoraMatrix{.data = data, .rows = rows, .cols = cols, .bf16 = bf16_};
  };
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (LoraTarget target : kAllLoraTargets) {
      const LoraPair& pair = adapter.layers[l][static_cast<int>(target)];
      if (pair.empty()) continue;
      const int in = LoraTargetIn(config, target), out = LoraTargetOut(config, target);
      CHECK_EQ(pair.a.size(), static_cast<size_t>(rank_) * in) << LoraTargetName(target);
      CHECK_EQ(pair.b.size(), static_cast<size_t>(out) * rank_) << LoraTargetName(target);
      Pair& packed = layers_[l][static_cast<int>(target)];
      for (size_t i = 0; i < pair.a.size(); ++i) put(i, pair.a[i]);  // A (rank, in) as given
      packed.a = view(rank_, in);
      for (int j = 0; j < out; ++j) {  // B (out, rank) transposed and scaled
        for (int k = 0; k < rank_; ++k) {
          put(static_cast<size_t>(k) * out + j,
              adapter.scale * pair.b[static_cast<size_t>(j) * rank_ + k]);
        }
      }
      packed.b = view(rank_, out);
    }
  }
}

void PackedLora::Apply(int layer, LoraTarget target, const float* x, std::span<const int> rows,
                       float* y, int ldy, float* t) const {
  const Pair& pair = layers_[layer][static_cast<int>(target)];
  if (pair.a.data == nullptr || rows.empty()) return;
  const Kernels& kernels = ActiveKernels();
  const int n = static_cast<int>(rows.size()), in = pair.a.cols, out = pair.b.cols;
  if (omp_in_parallel() || omp_get_max_threads() == 1) {
    kernels.lora_shrink(pair.a, x, in, rows.data(), n, 0, rank_, t);
    kernels.lora_expand(pair.b, t, rows.data(), n, 0, out, y, ldy);
    return;
  }
  // Each thread takes a range of ranks (pairs of them), then, once t is whole, a range of
  // columns (whole vectors of 32).
#pragma omp parallel
  {
    const int id = omp_get_thread_num(), threads = omp_get_num_threads();
    const int pairs = (rank_ + 1) / 2;
    const int k0 = std::min(rank_, 2 * (pairs * id / threads));
    const int k1 = std::min(rank_, 2 * (pairs * (id + 1) / threads));
    if (k0 < k1) kernels.lora_shrink(pair.a, x, in, rows.data(), n, k0, k1, t);
#pragma omp barrier
    const int chunks = (out + 31) / 32;
    const int j0 = std::min(out, 32 * (chunks * id / threads));
    const int j1 = std::min(out, 32 * (chunks * (id + 1) / threads));
    if (j0 < j1) kernels.lora_expand(pair.b, t, rows.data(), n, j0, j1, y, ldy);
  }
}

size_t PackedLora::weight_bytes() const {
  return bf16_ ? bf16_values_.size() * sizeof(uint16_t) : f32_values_.size() * sizeof(float);
}

}  // namespace pagoda
