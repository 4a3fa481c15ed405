// Opens a model by path, whatever its format: a GGUF file (by its magic), a Hugging Face
// directory (config.json + safetensors), or a llama2.c checkpoint file. Anything else is an
// INVALID_ARGUMENT that names the formats there are.
#ifndef PAGODA_COMMON_MODEL_MODEL_LOADER_H_
#define PAGODA_COMMON_MODEL_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/model/weight_source.h"

namespace pagoda {

// The checkpoint opened, its tensors as the file stores them (what the worker loads from).
absl::StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& model_path);
// Every weight widened to float32 (reference code and tests).
absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_path);
// The model's shape without its weights (validated as far as the header allows).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_MODEL_LOADER_H_
