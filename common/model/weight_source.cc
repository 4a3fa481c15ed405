#include "common/model/weight_source.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

// The type a checkpoint's matrices were in before ModelWeights widened them.
GgmlType StoredGgmlType(StoredPrecision precision) {
  switch (precision) {
    case StoredPrecision::kF32:
      return GgmlType::kF32;
    case StoredPrecision::kF16:
      return GgmlType::kF16;
    case StoredPrecision::kBf16:
      return GgmlType::kBF16;
    case StoredPrecision::kQuantized:
      break;
  }
  return GgmlType::kQ8_0;
}

StoredPrecision PrecisionOf(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return StoredPrecision::kF32;
    case GgmlType::kF16:
      return StoredPrecision::kF16;
    case GgmlType::kBF16:
      return StoredPrecision::kBf16;
    default:
      return StoredPrecision::kQuantized;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSource>> WeightSource::Create(
    ModelConfig config, const LlamaTensorNames& names, const ViewFinder& find,
    std::shared_ptr<const void> owner, bool mapped) {
  std::unique_ptr<WeightSource> source(
      new WeightSource(std::move(config), std::move(owner), mapped));
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(names, source->config_)) {
    ASSIGN_OR_RETURN(TensorView view, find(spec.name, spec.shape));
    source->views_[{spec.tensor, spec.layer}] = view;
  }
  return source;
}

absl::StatusOr<std::unique_ptr<WeightSource>> WeightSource::FromWeights(ModelWeights weights) {
  auto owner = std::make_shared<ModelWeights>(std::move(weights));
  const ModelConfig config = owner->config;
  if (static_cast<int>(owner->layers.size()) != config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("weights of ", owner->layers.size(),
                                                   " layers, the config has ", config.num_layers));
  }
  // Names for the error messages: the tensors' roles as Hugging Face names them.
  std::map<std::string, std::pair<LlamaTensor, int>> roles;
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(HfTensorNames(), config)) {
    roles[spec.name] = {spec.tensor, spec.layer};
  }
  const ViewFinder find = [&](const std::string& name,
                              std::span<const int64_t> shape) -> absl::StatusOr<TensorView> {
    const auto [tensor, layer] = roles.at(name);
    const std::vector<float>& values = *LlamaWeightSlot(tensor, layer, *owner);
    int64_t size = 1;
    for (int64_t d : shape) size *= d;
    if (static_cast<int64_t>(values.size()) != size) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " holds ", values.size(), " values, the config calls for ", size));
    }
    const int64_t cols = shape.back();
    return TensorView{.type = GgmlType::kF32,
                      .rows = cols > 0 ? size / cols : 0,
                      .cols = cols,
                      .data = reinterpret_cast<const uint8_t*>(values.data())};
  };
  const GgmlType stored = StoredGgmlType(owner->stored_precision);
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source,
                   Create(config, HfTensorNames(), find, owner, /*mapped=*/false));
  source->stored_type_ = stored;
  return source;
}

const TensorView& WeightSource::View(LlamaTensor tensor, int layer) const {
  return views_.at({tensor, layer});
}

GgmlType WeightSource::StoredType(LlamaTensor tensor, int layer) const {
  return stored_type_.value_or(View(tensor, layer).type);
}

std::vector<float> WeightSource::Floats(LlamaTensor tensor, int layer) const {
  if (!Has(tensor, layer)) return {};
  const TensorView& view = View(tensor, layer);
  std::vector<float> out(static_cast<size_t>(view.rows * view.cols));
  DequantizeRows(view, 0, view.rows, out.data());
  return out;
}

void WeightSource::Release(LlamaTensor tensor, int layer) const {
  if (mapped_) ReleaseMappedPages(View(tensor, layer));
}

size_t WeightSource::num_bytes() const {
  size_t bytes = 0;
  for (const auto& [key, view] : views_) bytes += view.num_bytes();
  return bytes;
}

ModelWeights ToModelWeights(const WeightSource& source) {
  ModelWeights w;
  w.config = source.config();
  w.layers.resize(w.config.num_layers);
  for (int layer = -1; layer < w.config.num_layers; ++layer) {
    for (int t = 0; t <= static_cast<int>(LlamaTensor::kDown); ++t) {
      const auto tensor = static_cast<LlamaTensor>(t);
      if (source.Has(tensor, layer))
        *LlamaWeightSlot(tensor, layer, &w) = source.Floats(tensor, layer);
    }
  }
  w.stored_precision = PrecisionOf(source.StoredType(LlamaTensor::kWq, 0));
  return w;
}

}  // namespace pagoda
