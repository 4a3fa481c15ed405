// RoPE scaling: how a model turns its rotary positions more slowly so that it reads contexts
// longer than the one it was trained for. Three kinds, as Hugging Face's `rope_scaling` and
// llama.cpp's `{arch}.rope.scaling.*` name them:
//   linear  every frequency divided by `factor` (positions divided by it);
//   llama3  Meta's band: wavelengths above original/low_freq_factor slow down by `factor`,
//           those below original/high_freq_factor stay, the band between blends;
//   yarn    YaRN (Qwen2/2.5/3): the same idea with the band set by rotations per original
//           context (beta_fast = 32 down to beta_slow = 1), and cos/sin multiplied by an
//           attention factor, 0.1 ln(factor) + 1 unless given.
// Anything else ("dynamic", "longrope", ...) is refused by name: a model run with the wrong
// RoPE runs, but reads its positions wrong.
#ifndef PAGODA_COMMON_MODEL_ROPE_SCALING_H_
#define PAGODA_COMMON_MODEL_ROPE_SCALING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace pagoda {

struct ModelConfig;

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1;
  // The context the model was trained for: Llama 3's band and YaRN's correction range are set
  // by it, and linear and YaRN stretch it to original_max_position x factor.
  int original_max_position = 8192;
  double low_freq_factor = 1;   // llama3
  double high_freq_factor = 4;  // llama3
  double beta_fast = 32;        // yarn: rotations per original context where the ramp starts
  double beta_slow = 1;         // yarn: ... and where it ends
  double attention_factor = 0;  // yarn: cos/sin multiplier; 0 = 0.1 ln(factor) + 1

  bool enabled() const { return type != RopeScalingType::kNone; }
  // Frequency of dimension pair i of a head of `head_dim` whose unscaled frequency is `freq`
  // (theta^(-2i/head_dim), the rope base being `theta`).
  double Frequency(double freq, int i, int head_dim, double theta) const;
  // What RoPE's cos and sin are multiplied by (yarn's attention factor; 1 for the others).
  double AttentionFactor() const;
  // original_max_position x factor: the context linear and yarn stretch a model to (vLLM's
  // derived max_model_len).
  int64_t ScaledContext() const;
  // "yarn:4:32768:32:1:1.13863": for the model fingerprint and logs; "" when none.
  std::string Describe() const;
  // OK when the values make sense (factor >= 1, original >= 1, ordered bands, a scaled context
  // of at most 2^20); else INVALID_ARGUMENT starting with `what`.
  absl::Status Validate(absl::string_view what) const;
};

// Hugging Face's `rope_scaling` object ("rope_type", or the older "type"; "default" is none).
// `max_position_embeddings` is original_max_position's default for linear and yarn (llama3's is
// 8192). INVALID_ARGUMENT naming `what` for a type not implemented, by name, or a bad value.
absl::StatusOr<RopeScaling> ParseRopeScaling(const Json& rs, int64_t max_position_embeddings,
                                             absl::string_view what);

// --rope-scaling (a JSON object as in config.json, e.g.
// {"rope_type":"yarn","factor":4,"original_max_position_embeddings":32768}) applied to a loaded
// model: replaces its scaling, and its context becomes original x factor. The original context
// defaults to the model's own (its file's scaling's, if any). "" leaves the config as it is.
// INVALID_ARGUMENT naming --rope-scaling when the text is not such an object, or the model's
// file already scales its RoPE by per-pair factors (GGUF's rope_freqs).
absl::Status ApplyRopeScalingFlag(absl::string_view json, ModelConfig* config);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_ROPE_SCALING_H_
