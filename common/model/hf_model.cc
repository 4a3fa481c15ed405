#include "common/model/hf_model.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/model/llama_weights_reader.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

// An id or a list of ids (eos_token_id may be either).
absl::Status AppendIds(const Json& v, absl::string_view key, absl::string_view what,
                       std::vector<int>* ids) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr) return absl::OkStatus();
  if (m->is_array()) {
    for (const Json& e : *m) {
      ASSIGN_OR_RETURN(int64_t id, JsonAsInt(e, absl::StrCat(what, ": ", key)));
      ids->push_back(static_cast<int>(id));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(int64_t id, JsonAsInt(*m, absl::StrCat(what, ": ", key)));
  ids->push_back(static_cast<int>(id));
  return absl::OkStatus();
}

// interleaved (2i, 2i+1) <-> rotate-half (i, i + hd/2) order of one head's rows.
std::vector<float> InterleavedToHalf(const std::vector<float>& w, int heads, int head_dim,
                                     int cols) {
  std::vector<float> out(w.size());
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < head_dim; ++i) {
      const int src = h * head_dim + (i < half ? 2 * i : 2 * (i - half) + 1);
      std::copy_n(&w[static_cast<size_t>(src) * cols], cols,
                  &out[static_cast<size_t>(h * head_dim + i) * cols]);
    }
  }
  return out;
}

}  // namespace

bool IsHfModelDir(const std::string& path) {
  return std::filesystem::is_directory(path) &&
         std::filesystem::exists(std::filesystem::path(path) / "config.json");
}

absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(Json j, ParseJson(text, path));
  const Json* arch = JsonMember(j, "architectures");
  std::string architecture;
  if (arch != nullptr && arch->is_array() && !arch->empty()) {
    ASSIGN_OR_RETURN(architecture, JsonAsString((*arch)[0], path + ": architectures"));
  }
  const bool qwen2 = architecture == "Qwen2ForCausalLM";
  const bool qwen3 = architecture == "Qwen3ForCausalLM";
  if (architecture != "LlamaForCausalLM" && architecture != "MistralForCausalLM" && !qwen2 &&
      !qwen3) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": architecture \"", architecture,
                     "\" is not supported (LlamaForCausalLM, MistralForCausalLM, "
                     "Qwen2ForCausalLM, Qwen3ForCausalLM)"));
  }
  ModelConfig c;
  c.name = std::filesystem::path(dir).filename().string();
  if (c.name.empty()) c.name = std::filesystem::path(dir).parent_path().filename().string();
  ModelShape shape;
  ASSIGN_OR_RETURN(shape.dim, JsonInt(j, "hidden_size", path));
  ASSIGN_OR_RETURN(shape.hidden_dim, JsonInt(j, "intermediate_size", path));
  ASSIGN_OR_RETURN(shape.num_layers, JsonInt(j, "num_hidden_layers", path));
  ASSIGN_OR_RETURN(shape.num_heads, JsonInt(j, "num_attention_heads", path));
  ASSIGN_OR_RETURN(shape.num_kv_heads, JsonIntOr(j, "num_key_value_heads", shape.num_heads, path));
  ASSIGN_OR_RETURN(shape.vocab_size, JsonInt(j, "vocab_size", path));
  ASSIGN_OR_RETURN(shape.head_dim, JsonIntOr(j, "head_dim", shape.DimPerHead(), path));
  ASSIGN_OR_RETURN(shape.max_seq_len, JsonIntOr(j, "max_position_embeddings", 2048, path));
  ASSIGN_OR_RETURN(double eps, JsonNumberOr(j, "rms_norm_eps", 1e-6, path));
  ASSIGN_OR_RETURN(double theta, JsonNumberOr(j, "rope_theta", 10000.0, path));
  ASSIGN_OR_RETURN(bool tied, JsonBoolOr(j, "tie_word_embeddings", false, path));
  ASSIGN_OR_RETURN(bool attention_bias, JsonBoolOr(j, "attention_bias", false, path));
  ASSIGN_OR_RETURN(bool mlp_bias, JsonBoolOr(j, "mlp_bias", false, path));
  if (attention_bias || mlp_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": attention_bias / mlp_bias (biases on o_proj or the MLP) are not "
                     "supported"));
  }
  ASSIGN_OR_RETURN(std::string act, JsonStringOr(j, "hidden_act", "silu", path));
  if (act != "silu") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": hidden_act \"", act, "\" is not supported (silu)"));
  }
  c.SetShape(shape);
  c.rms_norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  c.rope_style = RopeStyle::kHalf;
  c.tied_embeddings = tied;
  c.qkv_bias = qwen2;
  c.qk_norm = qwen3;
  if (const Json* rs = JsonMember(j, "rope_scaling"); rs != nullptr) {
    ASSIGN_OR_RETURN(c.rope_scaling,
                     ParseRopeScaling(*rs, shape.max_seq_len, path + ": rope_scaling"));
    // vLLM's derived length: Llama 3's max_position_embeddings already is the scaled context;
    // linear's and YaRN's is original x factor.
    if (c.rope_scaling.type == RopeScalingType::kLinear ||
        c.rope_scaling.type == RopeScalingType::kYarn) {
      c.max_seq_len = static_cast<int>(c.rope_scaling.ScaledContext());
    }
  }
  // Attention here is over the whole context: a sliding window caps the length instead, so
  // what is served is exact.
  ASSIGN_OR_RETURN(bool use_window, JsonBoolOr(j, "use_sliding_window", !qwen2 && !qwen3, path));
  if (const Json* w = JsonMember(j, "sliding_window"); w != nullptr && use_window) {
    ASSIGN_OR_RETURN(int64_t window, JsonAsInt(*w, absl::StrCat(path, ": sliding_window")));
    if (window > 0 && window < c.max_seq_len) c.max_seq_len = static_cast<int>(window);
  }
  ASSIGN_OR_RETURN(int64_t bos, JsonIntOr(j, "bos_token_id", 1, path));
  c.bos_id = static_cast<int>(bos);
  c.eos_ids.clear();
  RETURN_IF_ERROR(AppendIds(j, "eos_token_id", path, &c.eos_ids));
  const std::string gen_path = dir + "/generation_config.json";
  if (std::filesystem::exists(gen_path)) {
    ASSIGN_OR_RETURN(std::string gen_text, ReadTextFile(gen_path));
    ASSIGN_OR_RETURN(Json gen, ParseJson(gen_text, gen_path));
    RETURN_IF_ERROR(AppendIds(gen, "eos_token_id", gen_path, &c.eos_ids));
    ASSIGN_OR_RETURN(double temperature, JsonNumberOr(gen, "temperature", 1.0, gen_path));
    ASSIGN_OR_RETURN(double top_p, JsonNumberOr(gen, "top_p", 1.0, gen_path));
    ASSIGN_OR_RETURN(int64_t top_k, JsonIntOr(gen, "top_k", 0, gen_path));
    if (!(temperature >= 0) || !(top_p > 0 && top_p <= 1) || top_k < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(gen_path, ": needs temperature >= 0, top_p in (0, 1] and top_k >= 0"));
    }
    c.default_temperature = static_cast<float>(temperature);
    c.default_top_p = static_cast<float>(top_p);
    c.default_top_k = static_cast<int>(top_k);
  }
  std::sort(c.eos_ids.begin(), c.eos_ids.end());
  c.eos_ids.erase(std::unique(c.eos_ids.begin(), c.eos_ids.end()), c.eos_ids.end());
  const ModelConfigKeys keys = {.dim = "hidden_size",
                                .hidden_dim = "intermediate_size",
                                .num_layers = "num_hidden_layers",
                                .num_heads = "num_attention_heads",
                                .num_kv_heads = "num_key_value_heads",
                                .max_seq_len = "max_position_embeddings",
                                .eos_ids = "eos_token_id"};
  RETURN_IF_ERROR(c.Validate(path, keys));
  return c;
}

absl::StatusOr<std::unique_ptr<WeightSource>> OpenHfSource(const std::string& dir) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadHfConfig(dir));
  ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::Open(dir));
  auto files = std::make_shared<const SafetensorsModel>(std::move(st));
  return WeightSource::Create(
      std::move(config), HfTensorNames(),
      [&files](const std::string& name, std::span<const int64_t> shape) {
        return files->View(name, shape);
      },
      files, /*mapped=*/true);
}

absl::StatusOr<ModelWeights> LoadHfModel(const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, OpenHfSource(dir));
  return ToModelWeights(*source);
}

absl::Status WriteHfModel(const ModelWeights& weights, const std::string& dir, TensorDtype dtype) {
  const ModelConfig& c = weights.config;
  std::filesystem::create_directories(dir);
  const bool qwen2 = !weights.layers.empty() && !weights.layers[0].bq.empty();
  const bool qwen3 = c.qk_norm;
  if (qwen2 && qwen3) {
    return absl::InvalidArgumentError("q/k/v biases and q/k norms: no such HF architecture");
  }
  const char* architecture = qwen3   ? "Qwen3ForCausalLM"
                             : qwen2 ? "Qwen2ForCausalLM"
                                     : "LlamaForCausalLM";
  const char* model_type = qwen3 ? "qwen3" : qwen2 ? "qwen2" : "llama";
  const bool permute = c.rope_style == RopeStyle::kInterleaved;
  // Keeps permuted copies alive until the file is written.
  std::vector<std::unique_ptr<std::vector<float>>> keep;
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v,
                 int heads = 0, int cols = 0) {
    const std::vector<float>* values = &v;
    if (permute && heads > 0) {
      keep.push_back(
          std::make_unique<std::vector<float>>(InterleavedToHalf(v, heads, c.head_dim, cols)));
      values = keep.back().get();
    }
    tensors.push_back({name, std::move(shape), values});
  };
  add("model.embed_tokens.weight", {c.vocab_size, c.dim}, weights.token_embedding);
  add("model.norm.weight", {c.dim}, weights.final_norm);
  if (!c.tied_embeddings) add("lm_head.weight", {c.vocab_size, c.dim}, weights.classifier);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = weights.layers[l];
    const std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {c.dim}, L.attn_norm);
    add(p + "self_attn.q_proj.weight", {c.q_dim(), c.dim}, L.wq, c.num_heads, c.dim);
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), c.dim}, L.wk, c.num_kv_heads, c.dim);
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), c.dim}, L.wv);
    add(p + "self_attn.o_proj.weight", {c.dim, c.q_dim()}, L.wo);
    if (qwen3) {
      add(p + "self_attn.q_norm.weight", {c.head_dim}, L.q_norm, 1, 1);
      add(p + "self_attn.k_norm.weight", {c.head_dim}, L.k_norm, 1, 1);
    }
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", {c.q_dim()}, L.bq, c.num_heads, 1);
      add(p + "self_attn.k_proj.bias", {c.kv_dim()}, L.bk, c.num_kv_heads, 1);
      add(p + "self_attn.v_proj.bias", {c.kv_dim()}, L.bv);
    }
    add(p + "post_attention_layernorm.weight", {c.dim}, L.ffn_norm);
    add(p + "mlp.gate_proj.weight", {c.hidden_dim, c.dim}, L.w_gate);
    add(p + "mlp.up_proj.weight", {c.hidden_dim, c.dim}, L.w_up);
    add(p + "mlp.down_proj.weight", {c.dim, c.hidden_dim}, L.w_down);
  }
  RETURN_IF_ERROR(WriteSafetensors(dir + "/model.safetensors", tensors, dtype));
  const RopeScaling& rs = c.rope_scaling;
  std::string rope_scaling = "null";
  // Linear's context is max_position_embeddings x factor: the file states the unscaled one.
  int max_position = c.max_seq_len;
  switch (rs.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      rope_scaling = absl::StrCat("{\"rope_type\": \"linear\", \"factor\": ", rs.factor, "}");
      max_position = rs.original_max_position;
      break;
    case RopeScalingType::kLlama3:
      rope_scaling =
          absl::StrCat("{\"rope_type\": \"llama3\", \"factor\": ", rs.factor,
                       ", \"low_freq_factor\": ", rs.low_freq_factor,
                       ", \"high_freq_factor\": ", rs.high_freq_factor,
                       ", \"original_max_position_embeddings\": ", rs.original_max_position, "}");
      break;
    case RopeScalingType::kYarn:
      rope_scaling = absl::StrCat(
          "{\"rope_type\": \"yarn\", \"factor\": ", rs.factor, ", \"beta_fast\": ", rs.beta_fast,
          ", \"beta_slow\": ", rs.beta_slow,
          rs.attention_factor > 0 ? absl::StrCat(", \"attention_factor\": ", rs.attention_factor)
                                  : "",
          ", \"original_max_position_embeddings\": ", rs.original_max_position, "}");
      break;
  }
  const std::string config = absl::StrCat(
      "{\n  \"architectures\": [\"", architecture, "\"],\n  \"model_type\": \"", model_type,
      "\",\n  \"hidden_size\": ", c.dim, ",\n  \"intermediate_size\": ", c.hidden_dim,
      ",\n  \"num_hidden_layers\": ", c.num_layers, ",\n  \"num_attention_heads\": ", c.num_heads,
      ",\n  \"num_key_value_heads\": ", c.num_kv_heads, ",\n  \"head_dim\": ", c.head_dim,
      ",\n  \"vocab_size\": ", c.vocab_size, ",\n  \"max_position_embeddings\": ", max_position,
      ",\n  \"rms_norm_eps\": ", c.rms_norm_eps, ",\n  \"rope_theta\": ", c.rope_theta,
      ",\n  \"rope_scaling\": ", rope_scaling,
      ",\n  \"tie_word_embeddings\": ", c.tied_embeddings ? "true" : "false",
      ",\n  \"hidden_act\": \"silu\",\n  \"bos_token_id\": ", c.bos_id, ",\n  \"eos_token_id\": [",
      absl::StrJoin(c.eos_ids, ", "), "],\n  \"torch_dtype\": \"",
      dtype == TensorDtype::kF32   ? "float32"
      : dtype == TensorDtype::kF16 ? "float16"
                                   : "bfloat16",
      "\"\n}\n");
  std::ofstream out(dir + "/config.json");
  out << config;
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat(dir, ": cannot write config"));
}

}  // namespace pagoda
