// Hugging Face model directories: config.json (+ generation_config.json) and safetensors
// weights, for LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM
// (per-head q/k RMSNorm, explicit head_dim). RoPE stays in the HF
// layout (rotate-half); weights keep HF's [out, in] layout, which is ours.
#ifndef PAGODA_COMMON_MODEL_HF_MODEL_H_
#define PAGODA_COMMON_MODEL_HF_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/model/safetensors.h"
#include "common/model/weight_source.h"

namespace pagoda {

// Whether `path` is a directory with a config.json.
bool IsHfModelDir(const std::string& path);

// The model's shape from config.json; stop ids also from generation_config.json.
absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& dir);
absl::StatusOr<std::unique_ptr<WeightSource>> OpenHfSource(const std::string& dir);
absl::StatusOr<ModelWeights> LoadHfModel(const std::string& dir);

// Writes `weights` as an HF directory (config.json, model.safetensors in `dtype`): Qwen2 when
// the model has q/k/v biases, Qwen3 when it has q/k norms, Llama otherwise. A llama2.c model
// (interleaved RoPE) has its q and k rows permuted into the rotate-half layout, so both files
// compute the same function.
absl::Status WriteHfModel(const ModelWeights& weights, const std::string& dir, TensorDtype dtype);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_HF_MODEL_H_
