#include "tests/common/model/lora_files.h"

#include <cmath>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda::testing {
namespace {

constexpr const char* kGgufNames[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                      "ffn_gate", "ffn_up", "ffn_down"};

std::string PeftName(int layer, LoraTarget t, bool a) {
  const bool attn =
      t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
  return absl::StrCat("base_model.model.model.layers.", layer, attn ? ".self_attn." : ".mlp.",
                      LoraTargetName(t), a ? ".lora_A.weight" : ".lora_B.weight");
}

// B's rows as a file of that RoPE order holds them.
std::vector<float> BInOrder(const LoraAdapter& adapter, const ModelConfig& base, LoraTarget t,
                            int layer, bool file_interleaved) {
  std::vector<float> b = adapter.layers[layer][static_cast<int>(t)].b;
  const bool base_interleaved = base.rope_style == RopeStyle::kInterleaved;
  if ((t == LoraTarget::kQ || t == LoraTarget::kK) && file_interleaved != base_interleaved) {
    const int heads = t == LoraTarget::kQ ? base.num_heads : base.num_kv_heads;
    ReorderRopeRows(heads, base.head_dim, adapter.rank, file_interleaved, &b);
  }
  return b;
}

std::vector<float>* Weight(LayerWeights& l, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ:
      return &l.wq;
    case LoraTarget::kK:
      return &l.wk;
    case LoraTarget::kV:
      return &l.wv;
    case LoraTarget::kO:
      return &l.wo;
    case LoraTarget::kGate:
      return &l.w_gate;
    case LoraTarget::kUp:
      return &l.w_up;
    case LoraTarget::kDown:
      return &l.w_down;
  }
  return nullptr;
}

}  // namespace

LoraAdapter RandomLoraAdapter(const ModelConfig& config, int rank, double alpha, uint64_t seed,
                              double strength) {
  std::mt19937_64 rng(seed);
  LoraAdapter adapter;
  adapter.rank = rank;
  adapter.scale = static_cast<float>(alpha / rank);
  adapter.format = "random";
  adapter.layers.resize(config.num_layers);
  for (auto& layer : adapter.layers) {
    for (LoraTarget t : kAllLoraTargets) {
      const int in = LoraTargetIn(config, t), out = LoraTargetOut(config, t);
      LoraPair& pair = layer[static_cast<int>(t)];
      // x·Aᵀ has entries of about |x|/sqrt(3); B then sums rank of them: b makes scale·B·A·x
      // about strength/sqrt(in) per unit of x, that share of a random base matrix's.
      const float a_amp = 1.0f / std::sqrt(static_cast<float>(in));
      const float b_amp = static_cast<float>(3 * strength) /
                          (adapter.scale * std::sqrt(static_cast<float>(rank)) * std::sqrt(3.0f));
      std::uniform_real_distribution<float> ua(-a_amp, a_amp), ub(-b_amp, b_amp);
      pair.a.resize(static_cast<size_t>(rank) * in);
      pair.b.resize(static_cast<size_t>(out) * rank);
      for (float& v : pair.a) v = ua(rng);
      for (float& v : pair.b) v = ub(rng);
    }
  }
  return adapter;
}

void WritePeftLora(const LoraAdapter& adapter, const ModelConfig& base, double alpha,
                   const std::string& dir, TensorDtype dtype, const std::string& extra_config) {
  std::filesystem::create_directories(dir);
  std::vector<std::vector<float>> bs;  // kept alive until written
  bs.reserve(adapter.layers.size() * kNumLoraTargets);
  std::vector<TensorToWrite> tensors;
  std::string targets;
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const LoraPair& pair = adapter.layers[l][static_cast<int>(t)];
      if (pair.empty()) continue;
      const int64_t in = LoraTargetIn(base, t), out = LoraTargetOut(base, t);
      bs.push_back(BInOrder(adapter, base, t, static_cast<int>(l), /*file_interleaved=*/false));
      tensors.push_back({PeftName(l, t, true), {adapter.rank, in}, &pair.a});
      tensors.push_back({PeftName(l, t, false), {out, adapter.rank}, &bs.back()});
    }
  }
  for (LoraTarget t : kAllLoraTargets) {
    absl::StrAppend(&targets, targets.empty() ? "" : ", ", "\"", LoraTargetName(t), "\"");
  }
  const absl::Status written = WriteSafetensors(dir + "/adapter_model.safetensors", tensors, dtype);
  CHECK(written.ok()) << written;
  WriteFile(dir + "/adapter_config.json",
            absl::StrCat("{\"peft_type\": \"LORA\", \"r\": ", adapter.rank,
                         ", \"lora_alpha\": ", alpha, ", \"target_modules\": [", targets,
                         "], \"bias\": \"none\", \"base_model_name_or_path\": \"test/base\"",
                         extra_config.empty() ? "" : ", ", extra_config, "}"));
}

void WriteGgufLora(const LoraAdapter& adapter, const ModelConfig& base, const std::string& arch,
                   double alpha, const std::string& path) {
  GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddString("general.type", "adapter");
  w.AddString("adapter.type", "lora");
  w.AddF32("adapter.lora.alpha", static_cast<float>(alpha));
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const LoraPair& pair = adapter.layers[l][static_cast<int>(t)];
      if (pair.empty()) continue;
      const std::string name =
          absl::StrCat("blk.", l, ".", kGgufNames[static_cast<int>(t)], ".weight");
      const int64_t in = LoraTargetIn(base, t), out = LoraTargetOut(base, t);
      w.AddF32Tensor(name + ".lora_a", {adapter.rank, in}, pair.a);
      w.AddF32Tensor(name + ".lora_b", {out, adapter.rank},
                     BInOrder(adapter, base, t, static_cast<int>(l), arch == "llama"));
    }
  }
  const absl::Status written = w.Write(path);
  CHECK(written.ok()) << written;
}

ModelWeights MergeLora(const ModelWeights& base, const LoraAdapter& adapter) {
  ModelWeights merged = base;
  const int r = adapter.rank;
  for (size_t l = 0; l < merged.layers.size(); ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const LoraPair& pair = adapter.layers[l][static_cast<int>(t)];
      if (pair.empty()) continue;
      const int in = LoraTargetIn(base.config, t), out = LoraTargetOut(base.config, t);
      std::vector<float>& w = *Weight(merged.layers[l], t);
      for (int i = 0; i < out; ++i) {
        for (int j = 0; j < in; ++j) {
          double d = 0;
          for (int k = 0; k < r; ++k) {
            d += static_cast<double>(pair.b[static_cast<size_t>(i) * r + k]) *
                 pair.a[static_cast<size_t>(k) * in + j];
          }
          const size_t at = static_cast<size_t>(i) * in + j;
          w[at] = static_cast<float>(static_cast<double>(w[at]) + adapter.scale * d);
        }
      }
    }
  }
  return merged;
}

}  // namespace pagoda::testing
