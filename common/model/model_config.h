// The shape of a Llama-family model: constant after load, shared by router and worker.
#ifndef PAGODA_COMMON_MODEL_MODEL_CONFIG_H_
#define PAGODA_COMMON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model/rope_scaling.h"

namespace pagoda {

// How RoPE pairs the dimensions of a head.
enum class RopeStyle {
  kInterleaved,  // llama2.c / Meta: dims (2i, 2i+1) rotate together.
  kHalf,         // Hugging Face: dims (i, i + head_dim/2) rotate together.
};

// What a file format calls the fields ModelConfig::Validate() checks, so that its errors name
// the key the user finds in the file. The defaults are ModelConfig's own names.
struct ModelConfigKeys {
  std::string dim = "dim";
  std::string hidden_dim = "hidden_dim";
  std::string num_layers = "num_layers";
  std::string num_heads = "num_heads";
  std::string num_kv_heads = "num_kv_heads";
  std::string head_dim = "head_dim";
  std::string vocab_size = "vocab_size";
  std::string max_seq_len = "max_seq_len";
  std::string rms_norm_eps = "rms_norm_eps";
  std::string rope_theta = "rope_theta";
  std::string eos_ids = "eos_ids";
};

// A model's sizes as a file states them (any int64), for ModelConfig::SetShape.
struct ModelShape {
  int64_t dim = 0;
  int64_t hidden_dim = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_seq_len = 0;

  // dim / num_heads: the head size when a file does not state it.
  int64_t DimPerHead() const { return num_heads > 0 ? dim / num_heads : 0; }
};

struct ModelConfig {
  std::string name;  // For logs and GetModelInfo; not part of the fingerprint.
  // WeightsDigest() of the files the weights came from; "" when not computed (offline runs).
  std::string weights_digest;
  int dim = 0;         // Residual stream width.
  int hidden_dim = 0;  // FFN inner width.
  int num_layers = 0;
  int num_heads = 0;     // Query heads.
  int num_kv_heads = 0;  // Key/value heads (GQA when < num_heads).
  int head_dim = 0;      // Usually dim / num_heads.
  int vocab_size = 0;
  int max_seq_len = 0;  // Context length the model was trained for.
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  // linear, Llama 3's or YaRN's RoPE scaling (Hugging Face's "rope_scaling", GGUF's
  // rope.scaling.*, or --rope-scaling); none by default. With linear and YaRN, max_seq_len is
  // the scaled context (original x factor).
  RopeScaling rope_scaling;
  // GGUF's rope_freqs.weight (head_dim / 2): frequency i is divided by factor i, which is how
  // llama.cpp stores Llama 3.1's scaling. Empty: none.
  std::vector<float> rope_freq_factors;
  bool qkv_bias = false;         // q, k and v projections have biases (Qwen2)
  bool qk_norm = false;          // per-head RMSNorm on q and k before RoPE (Qwen3)
  bool tied_embeddings = false;  // Classifier shares the token-embedding matrix.
  int bos_id = 1;
  std::vector<int> eos_ids;  // Sampling one of these ends a sequence (unless ignore_eos).
  // Sampling defaults for requests that leave them unset (generation_config.json); not part
  // of the fingerprint.
  float default_temperature = 1.0f;
  float default_top_p = 1.0f;
  int default_top_k = 0;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // A stable description of everything that changes the model's outputs: its shape, and the
  // weights' digest when set.
  std::string Fingerprint() const;
  // RoPE's rotation frequency of dimension pair i (of head_dim / 2), scaling included.
  float RopeFrequency(int i) const;  // in float, as llama2.c computes it
  // What RoPE's cos and sin are multiplied by: YaRN's attention factor, else 1.
  float RopeAttentionFactor() const;

  // OK when the shape is one Pagoda can run, whatever file it came from: every size in range
  // (generous bounds that keep every size computation far from overflow), num_heads a multiple
  // of num_kv_heads, head_dim even, rms_norm_eps in (0, 1), rope_theta positive, eos ids in the
  // vocabulary, a sensible rope_scaling. Else INVALID_ARGUMENT "<source>: <key> ...", with `keys`
  // naming the fields.
  absl::Status Validate(absl::string_view source, const ModelConfigKeys& keys = {}) const;
  // Takes the sizes from `shape`; a value beyond int saturates, so that Validate() refuses it
  // instead of seeing it wrapped into range.
  void SetShape(const ModelShape& shape);
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_MODEL_CONFIG_H_
