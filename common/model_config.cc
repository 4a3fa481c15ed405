#include "common/model_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda {

std::string ModelConfig::Fingerprint() const {
  return absl::StrCat(
      "dim=", dim, ",hidden=", hidden_dim, ",layers=", num_layers, ",heads=", num_heads,
      ",kv_heads=", num_kv_heads, ",head_dim=", head_dim, ",vocab=", vocab_size,
      ",seq=", max_seq_len, ",eps=", rms_norm_eps, ",theta=", rope_theta,
      ",rope=", rope_style == RopeStyle::kInterleaved ? "interleaved" : "half",
      ",tied=", tied_embeddings, ",bos=", bos_id, ",eos=", absl::StrJoin(eos_ids, "|"));
}

}  // namespace pagoda
