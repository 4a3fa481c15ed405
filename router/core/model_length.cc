#include "router/core/model_length.h"

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::Status CheckMaxModelLen(int max_model_len, const ModelConfig& config) {
  if (max_model_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len=", max_model_len, ": expected 0 (the model's) or more"));
  }
  if (max_model_len <= config.max_seq_len) return absl::OkStatus();
  const RopeScaling& s = config.rope_scaling;
  if (!s.enabled()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-model-len=", max_model_len, " is above the model's context of ", config.max_seq_len,
        " tokens (what it was trained for); no RoPE scaling is configured to stretch it: ask for "
        "at most ",
        config.max_seq_len,
        ", or 0 for all of it, or configure scaling (e.g. --rope-scaling='{\"rope_type\":\"yarn\","
        "\"factor\":",
        (max_model_len + config.max_seq_len - 1) / config.max_seq_len,
        ",\"original_max_position_embeddings\":", config.max_seq_len, "}')"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--max-model-len=", max_model_len, " is above the model's context of ", config.max_seq_len,
      " tokens, RoPE scaling (", s.Describe(), ") included: ask for at most ", config.max_seq_len,
      ", or 0 for all of it, or a larger factor"));
}

std::string KvPoolShortfall(int max_model_len, int64_t num_blocks, int block_size,
                            absl::string_view kv_dtype) {
  const int64_t tokens = num_blocks * block_size;
  if (tokens >= max_model_len) return "";
  return absl::StrCat("its KV pool holds ", tokens, " tokens (", num_blocks, " blocks of ",
                      block_size, ", ", kv_dtype.empty() ? "?" : kv_dtype,
                      "), less than one sequence of the model length, ", max_model_len,
                      ": longer requests are refused on it; give it more (--kv-cache-mb, or "
                      "--kv-cache-dtype=bf16/int8 for 2-4x the tokens) or lower --max-model-len");
}

}  // namespace pagoda
