#include "common/model/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda {

std::string ModelConfig::Fingerprint() const {
  return absl::StrCat(
      "dim=", dim, ",hidden=", hidden_dim, ",layers=", num_layers, ",heads=", num_heads,
      ",kv_heads=", num_kv_heads, ",head_dim=", head_dim, ",vocab=", vocab_size,
      ",seq=", max_seq_len, ",eps=", rms_norm_eps, ",theta=", rope_theta,
      ",rope=", rope_style == RopeStyle::kInterleaved ? "interleaved" : "half",
      ",tied=", tied_embeddings, ",bos=", bos_id, ",eos=", absl::StrJoin(eos_ids, "|"),
      rope_scaling_factor > 0
          ? absl::StrCat(",rope_scaling=llama3:", rope_scaling_factor, ":", rope_low_freq_factor,
                         ":", rope_high_freq_factor, ":", rope_original_max_position)
          : "",
      rope_freq_factors.empty()
          ? ""
          : absl::StrCat(",rope_freqs=", absl::StrJoin(rope_freq_factors, ":")),
      qkv_bias ? ",qkv_bias" : "", qk_norm ? ",qk_norm" : "",
      weights_digest.empty() ? "" : ",weights=", weights_digest);
}

float ModelConfig::RopeFrequency(int i) const {
  float freq = 1.0f / std::pow(rope_theta, (2 * i) / static_cast<float>(head_dim));
  if (!rope_freq_factors.empty()) freq /= rope_freq_factors[i];
  if (rope_scaling_factor <= 0) return freq;
  // Llama 3: long wavelengths slow down by `factor`, short ones stay, the band between blends.
  const double wavelen = 2 * M_PI / freq;
  const double low_freq_wavelen = rope_original_max_position / rope_low_freq_factor;
  const double high_freq_wavelen = rope_original_max_position / rope_high_freq_factor;
  if (wavelen < high_freq_wavelen) return freq;
  if (wavelen > low_freq_wavelen) return static_cast<float>(freq / rope_scaling_factor);
  const double smooth = (rope_original_max_position / wavelen - rope_low_freq_factor) /
                        (rope_high_freq_factor - rope_low_freq_factor);
  return static_cast<float>((1 - smooth) * freq / rope_scaling_factor + smooth * freq);
}

}  // namespace pagoda
