// A LoRA adapter of a Llama-family model, read from the two formats people have (issue 39):
//
//   PEFT       a directory: adapter_config.json (r, lora_alpha, target_modules, use_rslora, ...)
//              and adapter_model.safetensors, tensors
//              base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight  (r, in)
//              base_model.model.model.layers.{i}.self_attn.q_proj.lora_B.weight  (out, r)
//              and the same for k/v/o_proj and mlp.gate/up/down_proj;
//   GGUF LoRA  llama.cpp's convert_lora_to_gguf.py output: general.type "adapter",
//              adapter.type "lora", adapter.lora.alpha, tensors blk.{i}.attn_q.weight.lora_a
//              (r, in) and .lora_b (out, r) (row-major; the file's dims innermost first).
//
// A target's update is W' = W + scale · B · A, scale = alpha / r (alpha / sqrt(r) with PEFT's
// rsLoRA; a GGUF alpha of 0 means 1, as llama.cpp reads it). B's rows are kept in the base
// model's row order: q and k of a base whose RoPE is interleaved (llama2.c, llama GGUF) were
// permuted from Hugging Face's order by the converters, and so are a PEFT adapter's q/k B rows
// here (a GGUF LoRA of the llama architecture comes permuted already).
//
// Everything is checked before any tensor is read or a buffer sized by the file: the path
// resolves (symlinks too) inside one of the allowed roots, the file sizes and rank are
// bounded, every tensor is a known target of a layer the base has, with the base's in/out
// dims. Refusals are INVALID_ARGUMENT naming the path and the field or tensor (NOT_FOUND when
// the path does not exist); nothing here CHECKs on file contents.
#ifndef PAGODA_COMMON_MODEL_LORA_ADAPTER_H_
#define PAGODA_COMMON_MODEL_LORA_ADAPTER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace pagoda {

// The matrices an adapter may update, in the order of a layer's forward pass.
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLoraTargets = 7;
inline constexpr std::array<LoraTarget, kNumLoraTargets> kAllLoraTargets = {
    LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
    LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};

// Whether `name` may name an adapter: 1 to 128 bytes of [A-Za-z0-9._:/-] (what requests, the
// step protocol and the router's flags name it by).
bool IsLoraAdapterName(std::string_view name);

// PEFT's module name: "q_proj", ..., "down_proj".
const char* LoraTargetName(LoraTarget target);
// The base matrix's (out, in) in `config`.
int LoraTargetOut(const ModelConfig& config, LoraTarget target);
int LoraTargetIn(const ModelConfig& config, LoraTarget target);

// One target's low-rank pair, f32 as the file stores it (before scaling).
struct LoraPair {
  std::vector<float> a;  // (rank, in)
  std::vector<float> b;  // (out, rank); empty a and b: the adapter leaves the target alone
  bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  int rank = 0;
  float scale = 0.0f;      // alpha / rank, or alpha / sqrt(rank) (rsLoRA)
  std::string format;      // "peft" or "gguf"
  std::string digest;      // 32+ hex digits of the files (XXH3): the same bytes, the same digest
  std::string base_model;  // what the file says it was trained on; "" when it does not say
  // (num_layers) of the base, each (kNumLoraTargets) by LoraTarget.
  std::vector<std::array<LoraPair, kNumLoraTargets>> layers;

  // Bytes of every A and B as f32.
  int64_t num_bytes() const;
};

struct LoraReadOptions {
  // Directories the adapter's path (and every file it opens) must resolve inside. Empty: every
  // path is refused.
  std::vector<std::string> allowed_roots;
  int max_rank = 256;
  int64_t max_bytes = int64_t{2} << 30;  // of the adapter's tensors as f32
};

// Reads the PEFT directory or GGUF LoRA file at `path` for a model of shape `base`.
absl::StatusOr<LoraAdapter> ReadLoraAdapter(const std::string& path, const ModelConfig& base,
                                            const LoraReadOptions& options);

// `path` with symlinks resolved, when it lies inside one of `roots` (each resolved too);
// NOT_FOUND when it does not exist, INVALID_ARGUMENT naming it when it lies outside.
absl::StatusOr<std::string> ResolveInsideRoots(const std::string& path,
                                               const std::vector<std::string>& roots);

// Reorders `rows` (num_heads · head_dim rows of `cols` values) from Hugging Face's RoPE order
// (pairs i, i + head_dim/2) to the interleaved one (pairs 2i, 2i + 1), as llama.cpp's
// converter permutes q and k, or back when !to_interleaved.
void ReorderRopeRows(int num_heads, int head_dim, int cols, bool to_interleaved,
                     std::vector<float>* rows);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_LORA_ADAPTER_H_
