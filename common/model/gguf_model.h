// GGUF model files (llama.cpp): architectures `llama`, `qwen2` and `qwen3`, tensors F32, F16,
// BF16, Q4_0, Q8_0, Q4_K and Q6_K, handed out as stored (OpenGgufSource) or widened to
// float32 (LoadGgufModel). llama.cpp's converter
// permutes a `llama` model's q/k rows for its "normal" RoPE, which pairs dims (2i, 2i+1):
// that is RopeStyle::kInterleaved here; `qwen2` / `qwen3` keep Hugging Face's rotate-half
// (llama.cpp's NEOX RoPE). Llama 3.1's scaling comes as rope_freqs.weight, a divisor per
// frequency (ModelConfig::rope_freq_factors).
#ifndef PAGODA_COMMON_MODEL_GGUF_MODEL_H_
#define PAGODA_COMMON_MODEL_GGUF_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/gguf_file.h"
#include "common/model/model_weights.h"
#include "common/model/weight_source.h"

namespace pagoda {

// The model's shape from the metadata and tensor table; reads no weights.
absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& file);
absl::StatusOr<ModelConfig> LoadGgufConfig(const std::string& path);
absl::StatusOr<std::unique_ptr<WeightSource>> OpenGgufSource(const std::string& path);
absl::StatusOr<ModelWeights> LoadGgufModel(const std::string& path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_GGUF_MODEL_H_
