#include "lib/text/tokenizer_loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/gguf_file.h"
#include "common/model/hf_model.h"
#include "lib/text/gguf_tokenizer.h"
#include "lib/text/hf_tokenizer.h"
#include "lib/text/llama2c_tokenizer.h"

namespace pagoda {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         int expected_vocab_size) {
  if (std::filesystem::is_directory(path)) {
    const std::string json = path + "/tokenizer.json";
    return LoadTokenizer(std::filesystem::exists(json) ? json : path + "/tokenizer.bin",
                         expected_vocab_size);
  }
  if (IsGgufFile(path)) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadGgufTokenizer(path);
    if (!t.ok()) return t.status();
    if (expected_vocab_size > 0 && (*t)->vocab_size() > expected_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", (*t)->vocab_size(), " tokens but the model has ", expected_vocab_size));
    }
    return t;
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::Load(path);
    if (!t.ok()) return t.status();
    // A model may have more rows than its tokenizer has tokens (padding), never fewer.
    if (expected_vocab_size > 0 && (*t)->vocab_size() > expected_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", (*t)->vocab_size(), " tokens but the model has ", expected_vocab_size));
    }
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  return Llama2cTokenizer::Load(path, expected_vocab_size);
}

std::string DefaultTokenizerPath(const std::string& model_path) {
  if (IsHfModelDir(model_path)) {
    return (std::filesystem::path(model_path) / "tokenizer.json").string();
  }
  if (IsGgufFile(model_path)) return model_path;  // the vocabulary is in the metadata
  return (std::filesystem::path(model_path).parent_path() / "tokenizer.bin").string();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path,
                                                              const std::string& tokenizer_path,
                                                              const ModelConfig& config) {
  return LoadTokenizer(tokenizer_path.empty() ? DefaultTokenizerPath(model_path) : tokenizer_path,
                       config.vocab_size);
}

}  // namespace pagoda
