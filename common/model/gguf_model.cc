#include "common/model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/llama_weights_reader.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

// RoPE scaling as llama.cpp writes and reads it (llama_model::load_hparams): `{arch}.rope.
// scaling.type` "none", "linear" or "yarn", `.factor` (or the older rope.scale_linear; 0 or 1
// is none), `.original_context_length` (default the context_length), and for YaRN `.attn_factor`
// (a multiplier of 0.1 ln(factor) + 1) and `.yarn_beta_fast` / `.yarn_beta_slow`.
absl::StatusOr<RopeScaling> GgufRopeScaling(const GgufFile& f, const std::string& k,
                                            int64_t context_length) {
  const std::string what = absl::StrCat(f.path(), ": ", k, "rope.scaling");
  ASSIGN_OR_RETURN(std::string type, f.StringOr(k + "rope.scaling.type", "linear"));
  ASSIGN_OR_RETURN(double factor, f.FloatOr(k + "rope.scaling.factor", 0));
  if (factor == 0) {
    ASSIGN_OR_RETURN(factor, f.FloatOr(k + "rope.scale_linear", 0));
  }
  RopeScaling s;
  if (type == "none" || (type == "linear" && (factor == 0 || factor == 1))) return s;
  if (type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".type \"", type, "\" is not supported (none, linear, yarn)"));
  }
  s.factor = factor;
  ASSIGN_OR_RETURN(int64_t original,
                   f.IntOr(k + "rope.scaling.original_context_length", context_length));
  s.original_max_position = static_cast<int>(std::clamp<int64_t>(original, 0, 1 << 30));
  if (s.type == RopeScalingType::kYarn) {
    ASSIGN_OR_RETURN(double attn_factor, f.FloatOr(k + "rope.scaling.attn_factor", 1));
    ASSIGN_OR_RETURN(s.beta_fast, f.FloatOr(k + "rope.scaling.yarn_beta_fast", 32));
    ASSIGN_OR_RETURN(s.beta_slow, f.FloatOr(k + "rope.scaling.yarn_beta_slow", 1));
    ASSIGN_OR_RETURN(double log_mul, f.FloatOr(k + "rope.scaling.yarn_log_multiplier", 0));
    if (log_mul != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ".yarn_log_multiplier (DeepSeek's mscale) is not supported"));
    }
    if (!(attn_factor > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ".attn_factor = ", attn_factor, " must be positive"));
    }
    s.attention_factor = attn_factor * (0.1 * std::log(s.factor) + 1);
  }
  RETURN_IF_ERROR(s.Validate(what));
  return s;
}

}  // namespace

absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& f) {
  const std::string& path = f.path();
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  ASSIGN_OR_RETURN(std::string arch, f.StringOr("general.architecture", ""));
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
    return bad("general.architecture \"", arch, "\" is not supported (llama, qwen2, qwen3)");
  }
  const std::string k = arch + ".";
  ModelShape shape;
  ASSIGN_OR_RETURN(shape.dim, f.Int(k + "embedding_length"));
  ASSIGN_OR_RETURN(shape.hidden_dim, f.Int(k + "feed_forward_length"));
  ASSIGN_OR_RETURN(shape.num_layers, f.Int(k + "block_count"));
  ASSIGN_OR_RETURN(shape.num_heads, f.Int(k + "attention.head_count"));
  ASSIGN_OR_RETURN(shape.num_kv_heads, f.IntOr(k + "attention.head_count_kv", shape.num_heads));
  ASSIGN_OR_RETURN(shape.max_seq_len, f.IntOr(k + "context_length", 2048));
  ASSIGN_OR_RETURN(double eps, f.FloatOr(k + "attention.layer_norm_rms_epsilon", 1e-5));
  ASSIGN_OR_RETURN(double theta, f.FloatOr(k + "rope.freq_base", 10000.0));
  ASSIGN_OR_RETURN(shape.head_dim, f.IntOr(k + "attention.key_length", shape.DimPerHead()));
  const int64_t head_dim = shape.head_dim;
  ASSIGN_OR_RETURN(int64_t value_dim, f.IntOr(k + "attention.value_length", head_dim));
  ASSIGN_OR_RETURN(int64_t rope_dims, f.IntOr(k + "rope.dimension_count", head_dim));
  auto embd = f.tensors().find("token_embd.weight");
  if (embd == f.tensors().end() || embd->second.dims.size() != 2) {
    return bad("no 2-dimensional token_embd.weight tensor");
  }
  ModelConfig c;
  ASSIGN_OR_RETURN(c.name, f.StringOr("general.name", ""));
  if (c.name.empty()) c.name = std::filesystem::path(path).stem().string();
  shape.vocab_size = embd->second.dims[1];
  c.SetShape(shape);
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  const ModelConfigKeys keys = {.dim = k + "embedding_length",
                                .hidden_dim = k + "feed_forward_length",
                                .num_layers = k + "block_count",
                                .num_heads = k + "attention.head_count",
                                .num_kv_heads = k + "attention.head_count_kv",
                                .head_dim = k + "attention.key_length",
                                .vocab_size = "vocabulary (token_embd.weight rows)",
                                .max_seq_len = k + "context_length",
                                .rms_norm_eps = k + "attention.layer_norm_rms_epsilon",
                                .rope_theta = k + "rope.freq_base"};
  RETURN_IF_ERROR(c.Validate(path, keys));
  if (value_dim != head_dim || rope_dims != head_dim) {
    return bad("attention.value_length (", value_dim, ") and rope.dimension_count (", rope_dims,
               ") must equal the head size (", head_dim, ")");
  }
  ASSIGN_OR_RETURN(c.rope_scaling, GgufRopeScaling(f, k, shape.max_seq_len));
  if (c.rope_scaling.enabled()) {  // vLLM's derived context: original x factor
    c.max_seq_len = static_cast<int>(c.rope_scaling.ScaledContext());
  }
  c.rope_style = arch == "llama" ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  c.tied_embeddings = !f.HasTensor("output.weight");
  c.qkv_bias = f.HasTensor("blk.0.attn_q.bias");
  c.qk_norm = arch == "qwen3";
  if (f.HasTensor("rope_freqs.weight")) {  // Llama 3.1's scaling, as llama.cpp stores it
    const int64_t freqs_shape[] = {head_dim / 2};
    ASSIGN_OR_RETURN(c.rope_freq_factors, f.Read("rope_freqs.weight", freqs_shape));
    for (float factor : c.rope_freq_factors) {
      if (!(factor > 0) || !std::isfinite(factor)) {
        return bad("rope_freqs.weight holds ", factor, "; factors must be positive");
      }
    }
  }
  ASSIGN_OR_RETURN(int64_t bos, f.IntOr("tokenizer.ggml.bos_token_id", 1));
  c.bos_id = static_cast<int>(bos);
  c.eos_ids.clear();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    if (!f.metadata().contains(key)) continue;
    ASSIGN_OR_RETURN(int64_t id, f.Int(key));
    if (id < 0 || id >= c.vocab_size) return bad(key, " ", id, " is outside the vocabulary");
    c.eos_ids.push_back(static_cast<int>(id));
  }
  std::sort(c.eos_ids.begin(), c.eos_ids.end());
  c.eos_ids.erase(std::unique(c.eos_ids.begin(), c.eos_ids.end()), c.eos_ids.end());
  return c;
}

absl::StatusOr<ModelConfig> LoadGgufConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  return GgufModelConfig(*f);
}

absl::StatusOr<std::unique_ptr<WeightSource>> OpenGgufSource(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> f, GgufFile::Open(path));
  ASSIGN_OR_RETURN(ModelConfig config, GgufModelConfig(*f));
  return WeightSource::Create(
      std::move(config), GgufTensorNames(),
      [&f](const std::string& name, std::span<const int64_t> shape) {
        return f->View(name, shape);
      },
      f, /*mapped=*/true);
}

absl::StatusOr<ModelWeights> LoadGgufModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, OpenGgufSource(path));
  return ToModelWeights(*source);
}

}  // namespace pagoda
