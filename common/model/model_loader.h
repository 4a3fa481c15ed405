// Opens a model by path, whatever its format: a GGUF file (by its magic), a Hugging Face
// directory (config.json + safetensors), or a llama2.c checkpoint file. Anything else is an
// INVALID_ARGUMENT that names the formats there are.
#ifndef PAGODA_COMMON_MODEL_MODEL_LOADER_H_
#define PAGODA_COMMON_MODEL_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/text/tokenizer.h"

namespace pagoda {

absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_path);
// The model's shape without its weights (validated as far as the header allows).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_path);

// The tokenizer to use with `model_path` when none is given: `tokenizer.bin` beside a
// llama2.c checkpoint, `tokenizer.json` in a Hugging Face directory, a GGUF file itself.
std::string DefaultTokenizerPath(const std::string& model_path);

// Loads `tokenizer_path` (or the default for the model) and checks it against `config`.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path,
                                                              const std::string& tokenizer_path,
                                                              const ModelConfig& config);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_MODEL_LOADER_H_
