#include "common/model/model_loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/gguf_file.h"
#include "common/model/gguf_model.h"
#include "common/model/hf_model.h"
#include "common/model/llama2c_checkpoint.h"

namespace pagoda {
namespace {

constexpr char kFormats[] =
    "--model takes a GGUF file, a Hugging Face directory (config.json + safetensors) or a "
    "llama2.c .bin checkpoint";

enum class Format { kHf, kGguf, kLlama2c, kUnknownDirectory };

Format Detect(const std::string& path) {
  if (IsHfModelDir(path)) return Format::kHf;
  if (std::filesystem::is_directory(path)) return Format::kUnknownDirectory;
  if (IsGgufFile(path)) return Format::kGguf;
  return Format::kLlama2c;  // no magic: its header is checked instead
}

// A file that is not a valid llama2.c checkpoint either: say which formats there are.
absl::Status NotAModel(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  return absl::InvalidArgumentError(absl::StrCat(
      status.message(), " (not a GGUF file or a Hugging Face directory either; ", kFormats, ")"));
}

absl::Status UnknownDirectory(const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": a directory without config.json; ", kFormats));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& model_path) {
  switch (Detect(model_path)) {
    case Format::kHf:
      return OpenHfSource(model_path);
    case Format::kGguf:
      return OpenGgufSource(model_path);
    case Format::kUnknownDirectory:
      return UnknownDirectory(model_path);
    case Format::kLlama2c:
      break;
  }
  absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenLlama2cSource(model_path);
  if (!source.ok()) return NotAModel(source.status());
  return source;
}

absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_path) {
  absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(model_path);
  if (!source.ok()) return source.status();
  return ToModelWeights(**source);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_path) {
  switch (Detect(model_path)) {
    case Format::kHf:
      return LoadHfConfig(model_path);
    case Format::kGguf:
      return LoadGgufConfig(model_path);
    case Format::kUnknownDirectory:
      return UnknownDirectory(model_path);
    case Format::kLlama2c:
      break;
  }
  absl::StatusOr<ModelConfig> c = LoadLlama2cConfig(model_path);
  if (!c.ok()) return NotAModel(c.status());
  return c;
}

}  // namespace pagoda
