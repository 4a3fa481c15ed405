// A Llama-family model's tensors: their roles, their names in each format, and the list a
// config calls for. The formats (safetensors, GGUF, llama2.c) differ only in the names and in
// how one tensor is found (common/model/weight_source.h).
#ifndef PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_
#define PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_

#include <cstdint>
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

// A Llama-family model's tensors by role.
enum class LlamaTensor {
  kEmbedding,   // (vocab, dim)
  kFinalNorm,   // (dim)
  kClassifier,  // (vocab, dim); only when the embedding is not tied
  kAttnNorm,    // (dim)
  kWq,          // (q_dim, dim)
  kWk,          // (kv_dim, dim)
  kWv,          // (kv_dim, dim)
  kWo,          // (dim, q_dim)
  kBq,          // (q_dim); only with config.qkv_bias
  kBk,          // (kv_dim)
  kBv,          // (kv_dim)
  kQNorm,       // (head_dim); only with config.qk_norm
  kKNorm,       // (head_dim)
  kFfnNorm,     // (dim)
  kGate,        // (hidden, dim)
  kUp,          // (hidden, dim)
  kDown,        // (dim, hidden)
};

// One tensor a model calls for: its role, layer (-1 for the model's own), name in the
// format and row-major shape (outermost first).
struct LlamaTensorSpec {
  LlamaTensor tensor;
  int layer;
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor `config` calls for (biases, q/k norms and the classifier only when it has
// them), the model's own first, then layer by layer.
std::vector<LlamaTensorSpec> LlamaTensorSpecs(const LlamaTensorNames& names,
                                              const ModelConfig& config);

// Where ModelWeights keeps a tensor. REQUIRES: w->layers has `layer` when layer >= 0.
std::vector<float>* LlamaWeightSlot(LlamaTensor tensor, int layer, ModelWeights* w);
const std::vector<float>* LlamaWeightSlot(LlamaTensor tensor, int layer, const ModelWeights& w);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_LLAMA_WEIGHTS_READER_H_
