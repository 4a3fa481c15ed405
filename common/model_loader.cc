#include "common/model_loader.h"

#include <filesystem>

#include "common/hf_model.h"
#include "common/llama2c_checkpoint.h"

namespace pagoda {

absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_path) {
  if (IsHfModelDir(model_path)) return LoadHfModel(model_path);
  return LoadLlama2cCheckpoint(model_path);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_path) {
  if (IsHfModelDir(model_path)) return LoadHfConfig(model_path);
  return LoadLlama2cConfig(model_path);
}

std::string DefaultTokenizerPath(const std::string& model_path) {
  if (IsHfModelDir(model_path)) {
    return (std::filesystem::path(model_path) / "tokenizer.json").string();
  }
  return (std::filesystem::path(model_path).parent_path() / "tokenizer.bin").string();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path,
                                                              const std::string& tokenizer_path,
                                                              const ModelConfig& config) {
  return LoadTokenizer(tokenizer_path.empty() ? DefaultTokenizerPath(model_path) : tokenizer_path,
                       config.vocab_size);
}

}  // namespace pagoda
