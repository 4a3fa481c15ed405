#include "common/model/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr int64_t kMaxScaledContext = 1 << 20;  // ModelConfig's largest max_seq_len

// YaRN's find_correction_dim: the pair index at which a head turns `rotations` times over
// `original` positions (transformers' _compute_yarn_parameters, after the YaRN paper).
double CorrectionDim(double rotations, int head_dim, double theta, int original) {
  return head_dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(theta));
}

}  // namespace

double RopeScaling::Frequency(double freq, int i, int head_dim, double theta) const {
  switch (type) {
    case RopeScalingType::kNone:
      return freq;
    case RopeScalingType::kLinear:
      return freq / factor;
    case RopeScalingType::kLlama3: {
      // Long wavelengths slow down by `factor`, short ones stay, the band between blends.
      const double wavelen = 2 * M_PI / freq;
      const double low_freq_wavelen = original_max_position / low_freq_factor;
      const double high_freq_wavelen = original_max_position / high_freq_factor;
      if (wavelen < high_freq_wavelen) return freq;
      if (wavelen > low_freq_wavelen) return freq / factor;
      const double smooth = (original_max_position / wavelen - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      return (1 - smooth) * freq / factor + smooth * freq;
    }
    case RopeScalingType::kYarn: {
      // Pairs below `low` turn more than beta_fast times per original context and keep their
      // frequency; pairs above `high` turn less than beta_slow times and are divided by
      // `factor`; a linear ramp between.
      const double low = std::max(
          std::floor(CorrectionDim(beta_fast, head_dim, theta, original_max_position)), 0.0);
      double high =
          std::min(std::ceil(CorrectionDim(beta_slow, head_dim, theta, original_max_position)),
                   static_cast<double>(head_dim - 1));
      if (high == low) high += 0.001;  // as transformers does, against a zero-width ramp
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      return freq / factor * ramp + freq * (1 - ramp);
    }
  }
  return freq;
}

double RopeScaling::AttentionFactor() const {
  if (type != RopeScalingType::kYarn) return 1;
  return attention_factor > 0 ? attention_factor : 0.1 * std::log(factor) + 1;
}

int64_t RopeScaling::ScaledContext() const {
  return static_cast<int64_t>(std::floor(original_max_position * factor));
}

std::string RopeScaling::Describe() const {
  switch (type) {
    case RopeScalingType::kNone:
      return "";
    case RopeScalingType::kLinear:
      return absl::StrCat("linear:", factor, ":", original_max_position);
    case RopeScalingType::kLlama3:
      return absl::StrCat("llama3:", factor, ":", low_freq_factor, ":", high_freq_factor, ":",
                          original_max_position);
    case RopeScalingType::kYarn:
      return absl::StrCat("yarn:", factor, ":", original_max_position, ":", beta_fast, ":",
                          beta_slow, ":", AttentionFactor());
  }
  return "";
}

absl::Status RopeScaling::Validate(absl::string_view what) const {
  if (!enabled()) return absl::OkStatus();
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", parts...));
  };
  if (!(factor >= 1) || !std::isfinite(factor)) return bad("factor = ", factor, " must be >= 1");
  if (original_max_position < 1) {
    return bad("original_max_position_embeddings = ", original_max_position, " must be >= 1");
  }
  if (type == RopeScalingType::kLlama3 &&
      !(low_freq_factor > 0 && high_freq_factor > low_freq_factor)) {
    return bad("needs 0 < low_freq_factor (", low_freq_factor, ") < high_freq_factor (",
               high_freq_factor, ")");
  }
  if (type == RopeScalingType::kYarn) {
    if (!(beta_fast > beta_slow && beta_slow > 0) || !std::isfinite(beta_fast)) {
      return bad("needs 0 < beta_slow (", beta_slow, ") < beta_fast (", beta_fast, ")");
    }
    if (!(attention_factor >= 0) || !std::isfinite(attention_factor)) {
      return bad("attention_factor = ", attention_factor, " must be positive");
    }
  }
  if (type != RopeScalingType::kLlama3 && ScaledContext() > kMaxScaledContext) {
    return bad("factor x original_max_position_embeddings = ", factor, " x ", original_max_position,
               " is above ", kMaxScaledContext, " tokens");
  }
  return absl::OkStatus();
}

absl::StatusOr<RopeScaling> ParseRopeScaling(const Json& rs, int64_t max_position_embeddings,
                                             absl::string_view what_view) {
  const std::string what(what_view);
  if (!rs.is_object()) return absl::InvalidArgumentError(what + ": expected a JSON object");
  ASSIGN_OR_RETURN(std::string name, JsonStringOr(rs, "rope_type", "", what));
  if (name.empty()) {
    ASSIGN_OR_RETURN(name, JsonStringOr(rs, "type", "", what));
  }
  RopeScaling s;
  if (name == "default" || name == "none") return s;
  if (name == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (name == "llama3") {
    s.type = RopeScalingType::kLlama3;
  } else if (name == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": type \"", name, "\" is not supported (linear, llama3, yarn)"));
  }
  ASSIGN_OR_RETURN(s.factor, JsonNumberOr(rs, "factor", 0, what));
  const int64_t original_default =
      s.type == RopeScalingType::kLlama3 ? 8192 : max_position_embeddings;
  ASSIGN_OR_RETURN(int64_t original,
                   JsonIntOr(rs, "original_max_position_embeddings", original_default, what));
  s.original_max_position = static_cast<int>(std::clamp<int64_t>(original, 0, kMaxScaledContext));
  ASSIGN_OR_RETURN(s.low_freq_factor, JsonNumberOr(rs, "low_freq_factor", 1, what));
  ASSIGN_OR_RETURN(s.high_freq_factor, JsonNumberOr(rs, "high_freq_factor", 4, what));
  ASSIGN_OR_RETURN(s.beta_fast, JsonNumberOr(rs, "beta_fast", 32, what));
  ASSIGN_OR_RETURN(s.beta_slow, JsonNumberOr(rs, "beta_slow", 1, what));
  ASSIGN_OR_RETURN(s.attention_factor, JsonNumberOr(rs, "attention_factor", 0, what));
  RETURN_IF_ERROR(s.Validate(what));
  return s;
}

absl::Status ApplyRopeScalingFlag(absl::string_view json, ModelConfig* config) {
  if (json.empty()) return absl::OkStatus();
  constexpr absl::string_view kFlag = "--rope-scaling";
  ASSIGN_OR_RETURN(Json rs, ParseJson(json, kFlag));
  if (!config->rope_freq_factors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFlag, ": the model's file already scales its RoPE (rope_freqs, Llama 3.1's scaling)"));
  }
  // The context it was trained for: its file's scaling's, else its own.
  const int trained = config->rope_scaling.enabled() ? config->rope_scaling.original_max_position
                                                     : config->max_seq_len;
  ASSIGN_OR_RETURN(RopeScaling s, ParseRopeScaling(rs, trained, kFlag));
  config->rope_scaling = s;
  config->max_seq_len = s.enabled() ? static_cast<int>(s.ScaledContext()) : trained;
  return absl::OkStatus();
}

}  // namespace pagoda
