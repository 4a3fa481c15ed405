#include "common/model/lora_adapter.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/model/gguf_file.h"
#include "common/model/safetensors.h"
#include "common/model/weights_digest.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxConfigBytes = 1 << 20;

// llama.cpp's GGUF names of each target, by LoraTarget.
constexpr std::array<const char*, kNumLoraTargets> kGgufNames = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

// One tensor of an adapter file, named and placed: layer, target, and whether it is A or B.
struct LoraTensor {
  std::string name;
  int layer = 0;
  LoraTarget target = LoraTarget::kQ;
  bool is_a = false;
  std::vector<int64_t> shape;  // row-major, as the file states it
};

absl::StatusOr<LoraTarget> TargetNamed(absl::string_view module, const std::string& what) {
  for (LoraTarget t : kAllLoraTargets) {
    if (module == LoraTargetName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": target module \"", module,
                   "\" is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                   "down_proj"));
}

absl::StatusOr<int> LayerIndex(absl::string_view digits, const ModelConfig& base,
                               const std::string& what) {
  int layer = 0;
  if (!absl::SimpleAtoi(digits, &layer) || layer < 0 || layer >= base.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": layer ", digits, " is not one of the base model's ", base.num_layers));
  }
  return layer;
}

// The checks every format shares, before any tensor is read: a rank in (0, max_rank], each
// tensor's shape the base's, each target an A and a B of one rank, the total bounded.
absl::StatusOr<int> CheckTensors(const std::vector<LoraTensor>& tensors, const ModelConfig& base,
                                 const LoraReadOptions& options, const std::string& path) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  if (tensors.empty()) return bad("no LoRA tensor");
  int rank = 0;
  int64_t bytes = 0;
  std::map<std::pair<int, LoraTarget>, int> halves;  // A and B seen: 1 + 2
  for (const LoraTensor& t : tensors) {
    if (t.shape.size() != 2) return bad(t.name, ": ", t.shape.size(), " dimensions, not 2");
    const int64_t r = t.is_a ? t.shape[0] : t.shape[1];
    const int64_t other = t.is_a ? t.shape[1] : t.shape[0];
    const int64_t want = t.is_a ? LoraTargetIn(base, t.target) : LoraTargetOut(base, t.target);
    if (r <= 0 || r > options.max_rank) {
      return bad(t.name, ": rank ", r, " is outside [1, ", options.max_rank, "]");
    }
    if (rank != 0 && r != rank) return bad(t.name, ": rank ", r, " where others have ", rank);
    rank = static_cast<int>(r);
    if (other != want) {
      return bad(t.name, ": shape [", t.shape[0], ", ", t.shape[1], "] does not fit the base's ",
                 LoraTargetName(t.target), " (", LoraTargetOut(base, t.target), " x ",
                 LoraTargetIn(base, t.target), "): ", t.is_a ? "in" : "out", " is ", want);
    }
    int& seen = halves[{t.layer, t.target}];
    if (seen & (t.is_a ? 1 : 2)) return bad(t.name, ": given twice");
    seen |= t.is_a ? 1 : 2;
    bytes += 4 * r * other;
    if (bytes > options.max_bytes) {
      return bad("tensors of more than ", options.max_bytes, " bytes as f32");
    }
  }
  for (const auto& [where, seen] : halves) {
    if (seen != 3) {
      return bad("layer ", where.first, " ", LoraTargetName(where.second), " has lora_",
                 seen == 1 ? "A but no lora_B" : "B but no lora_A");
    }
  }
  return rank;
}

// Reads each tensor into `adapter` through `read(name, shape)`, B's q/k rows reordered to the
// base's RoPE order when the file's differs.
template <typename Read>
absl::Status ReadTensors(const std::vector<LoraTensor>& tensors, const ModelConfig& base,
                         bool file_interleaved, Read read, LoraAdapter* adapter) {
  adapter->layers.assign(base.num_layers, {});
  const bool base_interleaved = base.rope_style == RopeStyle::kInterleaved;
  for (const LoraTensor& t : tensors) {
    ASSIGN_OR_RETURN(std::vector<float> values, read(t.name, t.shape));
    LoraPair& pair = adapter->layers[t.layer][static_cast<int>(t.target)];
    const bool rotated = t.target == LoraTarget::kQ || t.target == LoraTarget::kK;
    if (!t.is_a && rotated && file_interleaved != base_interleaved) {
      const int heads = t.target == LoraTarget::kQ ? base.num_heads : base.num_kv_heads;
      ReorderRopeRows(heads, base.head_dim, adapter->rank, base_interleaved, &values);
    }
    (t.is_a ? pair.a : pair.b) = std::move(values);
  }
  return absl::OkStatus();
}

// PEFT's adapter_config.json: what Pagoda cannot apply is refused by name.
struct PeftConfig {
  int rank = 0;
  double alpha = 0;
  bool rslora = false;
  std::vector<std::string> target_modules;  // empty: "all-linear"
  std::string base_model;
};

absl::StatusOr<PeftConfig> ReadPeftConfig(const std::string& path) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (error) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  if (size > kMaxConfigBytes) return bad(size, " bytes is too long for an adapter config");
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  ASSIGN_OR_RETURN(const Json json, ParseJson(text, path));
  if (!json.is_object()) return bad("not a JSON object");
  PeftConfig c;
  ASSIGN_OR_RETURN(const std::string peft_type, JsonStringOr(json, "peft_type", "LORA", path));
  if (peft_type != "LORA") return bad("peft_type ", peft_type, " is not LORA");
  ASSIGN_OR_RETURN(const int64_t r, JsonInt(json, "r", path));
  if (r <= 0 || r > (1 << 20)) return bad("r ", r, " out of range");
  c.rank = static_cast<int>(r);
  ASSIGN_OR_RETURN(c.alpha, JsonNumberOr(json, "lora_alpha", static_cast<double>(r), path));
  if (!std::isfinite(c.alpha)) return bad("lora_alpha is not finite");
  ASSIGN_OR_RETURN(c.rslora, JsonBoolOr(json, "use_rslora", false, path));
  ASSIGN_OR_RETURN(const bool dora, JsonBoolOr(json, "use_dora", false, path));
  if (dora) return bad("use_dora: DoRA adapters are not supported");
  ASSIGN_OR_RETURN(const bool fan_in_fan_out, JsonBoolOr(json, "fan_in_fan_out", false, path));
  if (fan_in_fan_out) return bad("fan_in_fan_out: transposed (Conv1D) weights are not supported");
  ASSIGN_OR_RETURN(const std::string bias, JsonStringOr(json, "bias", "none", path));
  if (bias != "none") return bad("bias \"", bias, "\": LoRA biases are not supported");
  // Options that change which weights the adapter touches or how: set, they are refused.
  for (const char* key : {"modules_to_save", "layers_to_transform", "layers_pattern",
                          "rank_pattern", "alpha_pattern", "megatron_config", "loftq_config"}) {
    const Json* v = JsonMember(json, key);
    if (v != nullptr && !v->empty()) return bad(key, " is set: not supported");
  }
  const Json* targets = JsonMember(json, "target_modules");
  if (targets == nullptr) return bad("no target_modules");
  if (targets->is_string()) {
    if (*targets != "all-linear") {
      return bad("target_modules as a pattern (", JsonDump(*targets),
                 ") is not supported; list the modules");
    }
  } else if (targets->is_array()) {
    for (const Json& t : *targets) {
      ASSIGN_OR_RETURN(std::string name, JsonAsString(t, absl::StrCat(path, ": target_modules")));
      RETURN_IF_ERROR(TargetNamed(name, path).status());
      c.target_modules.push_back(std::move(name));
    }
  } else {
    return bad("target_modules is neither a list nor a string");
  }
  ASSIGN_OR_RETURN(c.base_model, JsonStringOr(json, "base_model_name_or_path", "", path));
  return c;
}

absl::StatusOr<LoraAdapter> ReadPeft(const std::string& dir, const ModelConfig& base,
                                     const LoraReadOptions& options) {
  ASSIGN_OR_RETURN(const std::string config_path,
                   ResolveInsideRoots(dir + "/adapter_config.json", options.allowed_roots));
  ASSIGN_OR_RETURN(const PeftConfig config, ReadPeftConfig(config_path));
  ASSIGN_OR_RETURN(const std::string weights_path,
                   ResolveInsideRoots(dir + "/adapter_model.safetensors", options.allowed_roots));
  std::error_code error;
  const std::uintmax_t size = fs::file_size(weights_path, error);
  if (error || size > static_cast<std::uintmax_t>(options.max_bytes) + kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights_path, ": ", size, " bytes is too large"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(weights_path));
  std::vector<LoraTensor> tensors;
  constexpr absl::string_view kPrefix = "base_model.model.model.layers.";
  for (const auto& [name, info] : file->tensors()) {
    const std::string what = absl::StrCat(weights_path, ": tensor ", name);
    // layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}.weight
    const std::vector<absl::string_view> parts =
        absl::StrSplit(absl::string_view(name).substr(
                           absl::StartsWith(name, kPrefix) ? kPrefix.size() : name.size()),
                       '.');
    if (!absl::StartsWith(name, kPrefix) || parts.size() != 5 || parts[4] != "weight" ||
        (parts[3] != "lora_A" && parts[3] != "lora_B") ||
        (parts[1] != "self_attn" && parts[1] != "mlp")) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": not a LoRA weight of a decoder layer (", kPrefix,
                       "{i}.self_attn|mlp.{module}.lora_A|lora_B.weight)"));
    }
    LoraTensor t{.name = name, .is_a = parts[3] == "lora_A", .shape = info.shape};
    ASSIGN_OR_RETURN(t.layer, LayerIndex(parts[0], base, what));
    ASSIGN_OR_RETURN(t.target, TargetNamed(parts[2], what));
    if (!config.target_modules.empty() &&
        std::find(config.target_modules.begin(), config.target_modules.end(), parts[2]) ==
            config.target_modules.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", parts[2], " is not in the config's target_modules"));
    }
    tensors.push_back(std::move(t));
  }
  LoraAdapter adapter;
  ASSIGN_OR_RETURN(adapter.rank, CheckTensors(tensors, base, options, weights_path));
  if (adapter.rank != config.rank) {
    return absl::InvalidArgumentError(absl::StrCat(weights_path, ": tensors of rank ", adapter.rank,
                                                   " but the config's r is ", config.rank));
  }
  adapter.format = "peft";
  adapter.base_model = config.base_model;
  adapter.scale =
      static_cast<float>(config.alpha / (config.rslora ? std::sqrt(adapter.rank) : adapter.rank));
  RETURN_IF_ERROR(ReadTensors(
      tensors, base, /*file_interleaved=*/false,
      [&](const std::string& name, std::span<const int64_t> shape) {
        return file->Read(name, shape);
      },
      &adapter));
  // The weights' digest, and the config's (alpha and rsLoRA change the outputs too).
  ASSIGN_OR_RETURN(const std::string weights_digest, WeightsDigest(weights_path));
  ASSIGN_OR_RETURN(const std::string config_text, ReadTextFile(config_path));
  adapter.digest = absl::StrFormat("%s%016x", weights_digest,
                                   XXH3_64bits(config_text.data(), config_text.size()));
  return adapter;
}

absl::StatusOr<LoraAdapter> ReadGguf(const std::string& path, const ModelConfig& base,
                                     const LoraReadOptions& options) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  ASSIGN_OR_RETURN(const std::string type, file->StringOr("general.type", ""));
  if (type != "adapter") return bad("general.type is \"", type, "\", not \"adapter\"");
  ASSIGN_OR_RETURN(const std::string adapter_type, file->StringOr("adapter.type", ""));
  if (adapter_type != "lora") return bad("adapter.type is \"", adapter_type, "\", not \"lora\"");
  ASSIGN_OR_RETURN(const std::string arch, file->StringOr("general.architecture", ""));
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
    return bad("general.architecture \"", arch, "\" is not llama, qwen2 or qwen3");
  }
  ASSIGN_OR_RETURN(const double alpha, file->FloatOr("adapter.lora.alpha", 0.0));
  if (!std::isfinite(alpha)) return bad("adapter.lora.alpha is not finite");
  std::vector<LoraTensor> tensors;
  for (const auto& [name, info] : file->tensors()) {
    const std::string what = absl::StrCat(path, ": tensor ", name);
    // blk.{i}.{target}.weight.lora_{a|b}
    const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
    const auto target = parts.size() == 5
                            ? std::find(kGgufNames.begin(), kGgufNames.end(), parts[2])
                            : kGgufNames.end();
    if (parts.size() != 5 || parts[0] != "blk" || parts[3] != "weight" ||
        (parts[4] != "lora_a" && parts[4] != "lora_b")) {
      return bad("tensor ", name,
                 ": not a LoRA weight of a block (blk.{i}.{target}.weight.lora_a|lora_b)");
    }
    if (target == kGgufNames.end()) {
      return bad("tensor ", name, ": target ", parts[2],
                 " is not one of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down");
    }
    if (info.dims.size() != 2)
      return bad("tensor ", name, ": ", info.dims.size(), " dimensions, not 2");
    LoraTensor t{.name = name,
                 .target = static_cast<LoraTarget>(target - kGgufNames.begin()),
                 .is_a = parts[4] == "lora_a",
                 .shape = {info.dims[1], info.dims[0]}};
    ASSIGN_OR_RETURN(t.layer, LayerIndex(parts[1], base, what));
    tensors.push_back(std::move(t));
  }
  LoraAdapter adapter;
  ASSIGN_OR_RETURN(adapter.rank, CheckTensors(tensors, base, options, path));
  adapter.format = "gguf";
  ASSIGN_OR_RETURN(adapter.base_model, file->StringOr("general.base_model.0.name", ""));
  // llama.cpp: alpha / rank, and an alpha of 0 scales by 1.
  adapter.scale = alpha == 0 ? 1.0f : static_cast<float>(alpha / adapter.rank);
  RETURN_IF_ERROR(ReadTensors(
      tensors, base, /*file_interleaved=*/arch == "llama",
      [&](const std::string& name, std::span<const int64_t> shape) {
        return file->Read(name, shape);
      },
      &adapter));
  ASSIGN_OR_RETURN(adapter.digest, WeightsDigest(path));
  return adapter;
}

}  // namespace

bool IsLoraAdapterName(std::string_view name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '/' || c == '-';
  });
}

const char* LoraTargetName(LoraTarget target) {
  switch (target) {
    case LoraTarget::kQ:
      return "q_proj";
    case LoraTarget::kK:
      return "k_proj";
    case LoraTarget::kV:
      return "v_proj";
    case LoraTarget::kO:
      return "o_proj";
    case LoraTarget::kGate:
      return "gate_proj";
    case LoraTarget::kUp:
      return "up_proj";
    case LoraTarget::kDown:
      return "down_proj";
  }
  return "?";
}

int LoraTargetOut(const ModelConfig& c, LoraTarget target) {
  switch (target) {
    case LoraTarget::kQ:
      return c.q_dim();
    case LoraTarget::kK:
    case LoraTarget::kV:
      return c.kv_dim();
    case LoraTarget::kO:
    case LoraTarget::kDown:
      return c.dim;
    case LoraTarget::kGate:
    case LoraTarget::kUp:
      return c.hidden_dim;
  }
  return 0;
}

int LoraTargetIn(const ModelConfig& c, LoraTarget target) {
  switch (target) {
    case LoraTarget::kO:
      return c.q_dim();
    case LoraTarget::kDown:
      return c.hidden_dim;
    default:
      return c.dim;
  }
}

int64_t LoraAdapter::num_bytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers) {
    for (const LoraPair& pair : layer)
      bytes += 4 * static_cast<int64_t>(pair.a.size() + pair.b.size());
  }
  return bytes;
}

absl::StatusOr<std::string> ResolveInsideRoots(const std::string& path,
                                               const std::vector<std::string>& roots) {
  std::error_code error;
  const fs::path resolved = fs::canonical(path, error);
  if (error) return absl::NotFoundError(absl::StrCat(path, ": not found"));
  for (const std::string& root : roots) {
    const fs::path r = fs::canonical(root, error);
    if (error) continue;
    const fs::path relative = resolved.lexically_relative(r);
    if (!relative.empty() && *relative.begin() != "..") return resolved.string();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": outside the adapter directories (--lora-dir)"));
}

void ReorderRopeRows(int num_heads, int head_dim, int cols, bool to_interleaved,
                     std::vector<float>* rows) {
  const std::vector<float> from = *rows;
  const int half = head_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      for (int a = 0; a < 2; ++a) {
        const size_t hf = static_cast<size_t>(h) * head_dim + a * half + i;  // Hugging Face's
        const size_t il = static_cast<size_t>(h) * head_dim + 2 * i + a;     // interleaved
        const size_t dst = to_interleaved ? il : hf, src = to_interleaved ? hf : il;
        std::copy_n(&from[src * cols], cols, &(*rows)[dst * cols]);
      }
    }
  }
}

absl::StatusOr<LoraAdapter> ReadLoraAdapter(const std::string& path, const ModelConfig& base,
                                            const LoraReadOptions& options) {
  ASSIGN_OR_RETURN(const std::string resolved, ResolveInsideRoots(path, options.allowed_roots));
  std::error_code error;
  if (fs::is_directory(resolved, error)) return ReadPeft(resolved, base, options);
  const std::uintmax_t size = fs::file_size(resolved, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  // A GGUF LoRA stores at most f32: bounded by the tensors' bound and room for metadata.
  if (size > static_cast<std::uintmax_t>(options.max_bytes) + (64 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes is too large"));
  }
  if (!IsGgufFile(resolved)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": neither a PEFT directory (adapter_config.json) nor a GGUF LoRA file"));
  }
  return ReadGguf(resolved, base, options);
}

}  // namespace pagoda
