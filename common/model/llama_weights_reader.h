// Reading a Llama-family model's weights out of a file format by tensor name: the formats
// (safetensors, GGUF) differ only in the names and in how one tensor is read.
#ifndef PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_
#define PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"

namespace pagoda {

// One format's tensor names. A layer tensor is named StrCat(layer_prefix, l, ".", suffix).
struct LlamaTensorNames {
  std::string embedding, final_norm, classifier;
  std::string layer_prefix;
  std::string attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
  std::string ffn_norm, w_gate, w_up, w_down;
};

// Hugging Face's LlamaForCausalLM / Qwen2 / Qwen3 names.
const LlamaTensorNames& HfTensorNames();
// llama.cpp's GGUF names.
const LlamaTensorNames& GgufTensorNames();

// Reads tensor `name` as float32, refusing a shape other than `shape` (outermost first).
using TensorReader = std::function<absl::StatusOr<std::vector<float>>(const std::string& name,
                                                                      std::vector<int64_t> shape)>;

// Fills every weight of `w` that `w->config` calls for (biases, q/k norms and the classifier
// only when the config has them). The first error names the tensor.
absl::Status ReadLlamaWeights(const LlamaTensorNames& names, const TensorReader& read,
                              ModelWeights* w);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_
