#include "worker/packed_lora.h"

#include <algorithm>

#include "common/dtype_names.h"
#include "glog/logging.h"

namespace pagoda {

PackedLora::PackedLora(const LoraAdapter& adapter, const ModelConfig& config, WeightDtype dtype)
    : rank_(adapter.rank), layers_(adapter.layers.size()) {
  CHECK(rank_ >= 1 && rank_ <= kMaxLoraRank) << "rank " << rank_;
  CHECK(dtype == WeightDtype::kF32 || dtype == WeightDtype::kBf16) << WeightDtypeName(dtype);
  CHECK_EQ(static_cast<int>(adapter.layers.size()), config.num_layers);
  std::vector<float> scaled;
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (LoraTarget target : kAllLoraTargets) {
      const LoraPair& pair = adapter.layers[l][static_cast<int>(target)];
      if (pair.empty()) continue;
      const int in = LoraTargetIn(config, target), out = LoraTargetOut(config, target);
      CHECK_EQ(pair.a.size(), static_cast<size_t>(rank_) * in) << LoraTargetName(target);
      CHECK_EQ(pair.b.size(), static_cast<size_t>(out) * rank_) << LoraTargetName(target);
      scaled.resize(pair.b.size());
      for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = adapter.scale * pair.b[i];
      Pair& packed = layers_[l][static_cast<int>(target)];
      packed.a = std::make_unique<Linear>(pair.a.data(), in, rank_, std::vector<float>(),
                                          /*accumulate=*/false, dtype);
      packed.b = std::make_unique<Linear>(scaled.data(), rank_, out, std::vector<float>(),
                                          /*accumulate=*/true, dtype);
    }
  }
}

void PackedLora::Apply(int layer, LoraTarget target, const float* x, std::span<const int> rows,
                       float* y, int ldy, const LoraScratch& scratch) const {
  const Pair& pair = layers_[layer][static_cast<int>(target)];
  if (pair.a == nullptr || rows.empty()) return;
  const int n = static_cast<int>(rows.size()), in = pair.a->in(), out = pair.b->out();
  // Rows of one run (a prefill chunk, or every row of the step) are read and written in place.
  if (rows.back() - rows.front() + 1 == n) {
    const size_t first = rows.front();
    pair.a->Run(x + first * in, n, scratch.t);
    pair.b->Run(scratch.t, n, y + first * ldy, ldy);
    return;
  }
  for (int i = 0; i < n; ++i) {
    std::copy_n(x + static_cast<size_t>(rows[i]) * in, in, scratch.x + static_cast<size_t>(i) * in);
    std::copy_n(y + static_cast<size_t>(rows[i]) * ldy, out,
                scratch.y + static_cast<size_t>(i) * out);
  }
  pair.a->Run(scratch.x, n, scratch.t);
  pair.b->Run(scratch.t, n, scratch.y);
  for (int i = 0; i < n; ++i) {
    std::copy_n(scratch.y + static_cast<size_t>(i) * out, out,
                y + static_cast<size_t>(rows[i]) * ldy);
  }
}

size_t PackedLora::weight_bytes() const {
  size_t bytes = 0;
  for (const auto& layer : layers_) {
    for (const Pair& pair : layer) {
      if (pair.a) bytes += pair.a->weight_bytes() + pair.b->weight_bytes();
    }
  }
  return bytes;
}

}  // namespace pagoda
