#include "common/model/model_config.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda {
namespace {

// Far beyond any model's shape, and small enough that every size computed from them
// (vocab x dim, layers x dim x hidden, in bytes) fits in int64 with room to spare.
constexpr int kMaxWidth = 1 << 16;  // dim, heads, head_dim; 4x for hidden_dim
constexpr int kMaxLayers = 1 << 10;
constexpr int kMaxVocab = 1 << 20;
constexpr int kMaxSeqLen = 1 << 20;

int SaturatedInt(int64_t v) { return static_cast<int>(std::clamp<int64_t>(v, INT_MIN, INT_MAX)); }

}  // namespace

std::string ModelConfig::Fingerprint() const {
  return absl::StrCat(
      "dim=", dim, ",hidden=", hidden_dim, ",layers=", num_layers, ",heads=", num_heads,
      ",kv_heads=", num_kv_heads, ",head_dim=", head_dim, ",vocab=", vocab_size,
      ",seq=", max_seq_len, ",eps=", rms_norm_eps, ",theta=", rope_theta,
      ",rope=", rope_style == RopeStyle::kInterleaved ? "interleaved" : "half",
      ",tied=", tied_embeddings, ",bos=", bos_id, ",eos=", absl::StrJoin(eos_ids, "|"),
      rope_scaling.enabled() ? absl::StrCat(",rope_scaling=", rope_scaling.Describe()) : "",
      rope_freq_factors.empty()
          ? ""
          : absl::StrCat(",rope_freqs=", absl::StrJoin(rope_freq_factors, ":")),
      qkv_bias ? ",qkv_bias" : "", qk_norm ? ",qk_norm" : "",
      weights_digest.empty() ? "" : ",weights=", weights_digest);
}

float ModelConfig::RopeFrequency(int i) const {
  float freq = 1.0f / std::pow(rope_theta, (2 * i) / static_cast<float>(head_dim));
  if (!rope_freq_factors.empty()) freq /= rope_freq_factors[i];
  if (!rope_scaling.enabled()) return freq;
  return static_cast<float>(rope_scaling.Frequency(freq, i, head_dim, rope_theta));
}

float ModelConfig::RopeAttentionFactor() const {
  return static_cast<float>(rope_scaling.AttentionFactor());
}

absl::Status ModelConfig::Validate(absl::string_view source, const ModelConfigKeys& keys) const {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  struct Range {
    const std::string& key;
    int value, lo, hi;
  };
  const Range ranges[] = {
      {keys.dim, dim, 1, kMaxWidth},
      {keys.hidden_dim, hidden_dim, 1, 4 * kMaxWidth},
      {keys.num_layers, num_layers, 1, kMaxLayers},
      {keys.num_heads, num_heads, 1, kMaxWidth},
      {keys.num_kv_heads, num_kv_heads, 1, kMaxWidth},
      {keys.head_dim, head_dim, 2, kMaxWidth},
      {keys.vocab_size, vocab_size, 1, kMaxVocab},
      {keys.max_seq_len, max_seq_len, 1, kMaxSeqLen},
  };
  for (const Range& r : ranges) {
    if (r.value < r.lo || r.value > r.hi) {
      return bad(r.key, " = ", r.value, " is out of range [", r.lo, ", ", r.hi, "]");
    }
  }
  if (num_heads % num_kv_heads != 0 || head_dim % 2 != 0) {
    return bad(keys.num_heads, " (", num_heads, ") must be a multiple of ", keys.num_kv_heads, " (",
               num_kv_heads, ") and ", keys.head_dim, " (", head_dim, ") even");
  }
  if (!(rms_norm_eps > 0 && rms_norm_eps < 1)) {
    return bad(keys.rms_norm_eps, " = ", rms_norm_eps, " is out of range (0, 1)");
  }
  if (!(rope_theta > 0)) return bad(keys.rope_theta, " = ", rope_theta, " must be positive");
  for (int id : eos_ids) {
    if (id < 0 || id >= vocab_size) return bad(keys.eos_ids, " ", id, " is outside the vocabulary");
  }
  return rope_scaling.Validate(absl::StrCat(source, ": rope_scaling"));
}

void ModelConfig::SetShape(const ModelShape& shape) {
  dim = SaturatedInt(shape.dim);
  hidden_dim = SaturatedInt(shape.hidden_dim);
  num_layers = SaturatedInt(shape.num_layers);
  num_heads = SaturatedInt(shape.num_heads);
  num_kv_heads = SaturatedInt(shape.num_kv_heads);
  head_dim = SaturatedInt(shape.head_dim);
  vocab_size = SaturatedInt(shape.vocab_size);
  max_seq_len = SaturatedInt(shape.max_seq_len);
}

}  // namespace pagoda
