#include "router/core/model_length.h"

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::Status CheckMaxModelLen(int max_model_len, const ModelConfig& config) {
  if (max_model_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len=", max_model_len, ": expected 0 (the model's) or more"));
  }
  if (max_model_len > config.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-model-len=", max_model_len, " is above the model's context of ", config.max_seq_len,
        " tokens (what it was trained for); no RoPE scaling is configured to stretch it: ask for "
        "at most ",
        config.max_seq_len, ", or 0 for all of it"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda
