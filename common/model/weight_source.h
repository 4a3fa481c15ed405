// A checkpoint opened for loading: its config and a TensorView of each weight as the file
// stores it, borrowed from the file's mapping, which the source keeps alive. The worker packs
// each matrix straight from its view and then releases the view's pages, so a model loads in
// about its packed size plus one tensor, whatever the file's types. Every tensor the config
// calls for is found and its shape checked when the source is made, before any is read.
// Thread-safe after creation: const methods only (set_weights_digest comes before).
#ifndef PAGODA_COMMON_MODEL_WEIGHT_SOURCE_H_
#define PAGODA_COMMON_MODEL_WEIGHT_SOURCE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/llama_weights_reader.h"
#include "common/model/model_weights.h"
#include "common/model/rope_scaling.h"
#include "common/model/tensor_view.h"

namespace pagoda {

class WeightSource {
 public:
  // Finds tensor `name` in a format, refusing a shape other than `shape` (row-major).
  using ViewFinder = std::function<absl::StatusOr<TensorView>(const std::string& name,
                                                              std::span<const int64_t> shape)>;

  // Views of every tensor LlamaTensorSpecs(names, config) lists, through `find`; the first
  // error names the tensor. `owner` keeps the bytes alive. `mapped`: the bytes are pages of a
  // read-only file mapping, which Release may drop.
  static absl::StatusOr<std::unique_ptr<WeightSource>> Create(ModelConfig config,
                                                              const LlamaTensorNames& names,
                                                              const ViewFinder& find,
                                                              std::shared_ptr<const void> owner,
                                                              bool mapped);
  // Over weights already widened to f32 (tests, random models): `auto` follows
  // weights.stored_precision. INVALID_ARGUMENT when a tensor's size does not match the config.
  static absl::StatusOr<std::unique_ptr<WeightSource>> FromWeights(ModelWeights weights);

  const ModelConfig& config() const { return config_; }
  // The fingerprint's digest of the files (common/model/weights_digest.h), set by the worker.
  void set_weights_digest(std::string digest) { config_.weights_digest = std::move(digest); }
  // --rope-scaling's JSON applied to the config (ApplyRopeScalingFlag); "" changes nothing.
  absl::Status ApplyRopeScaling(absl::string_view json) {
    return ApplyRopeScalingFlag(json, &config_);
  }
  // Whether the config calls for the tensor (biases, q/k norms, an untied classifier).
  bool Has(LlamaTensor tensor, int layer = -1) const { return views_.contains({tensor, layer}); }
  // REQUIRES: Has(tensor, layer). `layer` is -1 for the embedding, final norm and classifier.
  const TensorView& View(LlamaTensor tensor, int layer = -1) const;
  // The ggml type the checkpoint stored the tensor in: what --weight-dtype=auto follows.
  GgmlType StoredType(LlamaTensor tensor, int layer = -1) const;
  // A tensor as f32 values (norms, biases); empty when the config does not call for it.
  std::vector<float> Floats(LlamaTensor tensor, int layer = -1) const;
  // The tensor has been packed: its file pages may go (they are read again if it is used).
  void Release(LlamaTensor tensor, int layer = -1) const;
  // Bytes of every tensor as the file stores them.
  size_t num_bytes() const;

 private:
  WeightSource(ModelConfig config, std::shared_ptr<const void> owner, bool mapped)
      : config_(std::move(config)), owner_(std::move(owner)), mapped_(mapped) {}

  ModelConfig config_;
  std::shared_ptr<const void> owner_;  // the mapping (or the ModelWeights) the views point into
  bool mapped_;
  std::optional<GgmlType> stored_type_;  // of every matrix, for FromWeights' widened weights
  std::map<std::pair<LlamaTensor, int>, TensorView> views_;
};

// Every weight of `source` widened to f32, in ModelWeights (reference code and tests).
ModelWeights ToModelWeights(const WeightSource& source);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_WEIGHT_SOURCE_H_
