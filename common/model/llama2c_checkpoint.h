// llama2.c checkpoints (karpathy/llama2.c, "version 0" / legacy layout):
//
//   int32 header[7] = {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len}
//   float token_embedding[vocab][dim], rms_att[L][dim], wq[L][dim][dim],
//         wk[L][kv_dim][dim], wv[L][kv_dim][dim], wo[L][dim][dim], rms_ffn[L][dim],
//         w1[L][hidden][dim], w2[L][dim][hidden], w3[L][hidden][dim], rms_final[dim],
//         freq_cis_real[seq_len][head_dim/2], freq_cis_imag[seq_len][head_dim/2] (unused),
//         wcls[vocab][dim]   only when vocab_size in the header is negative (untied).
//
// Every tensor is bounds-checked against the file size; a truncated, oversized or inconsistent
// file is an error naming the file and the reason.
#ifndef PAGODA_COMMON_MODEL_LLAMA2C_CHECKPOINT_H_
#define PAGODA_COMMON_MODEL_LLAMA2C_CHECKPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/model/weight_source.h"

namespace pagoda {

// Opens a checkpoint (mapped) with a view of each tensor, all F32.
absl::StatusOr<std::unique_ptr<WeightSource>> OpenLlama2cSource(const std::string& path);

// Loads a checkpoint. The config gets llama2.c's conventions: interleaved RoPE, theta 1e4,
// eps 1e-5, BOS 1, and stop ids {1, 2} (these models end a story with BOS).
absl::StatusOr<ModelWeights> LoadLlama2cCheckpoint(const std::string& path);

// Reads only the header (and checks the file size against it): the shape of the model, for
// the router, which holds no weights.
absl::StatusOr<ModelConfig> LoadLlama2cConfig(const std::string& path);

// Writes `weights` in the same format (for tests and the random-model generator).
// REQUIRES: weights are consistent with weights.config; head_dim == dim / num_heads.
absl::Status WriteLlama2cCheckpoint(const ModelWeights& weights, const std::string& path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_LLAMA2C_CHECKPOINT_H_
