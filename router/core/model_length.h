// --max-model-len against the model: a length above the context the model can read is refused
// (as vLLM does), not silently cut to it. That context is the model's max_seq_len: the one it
// was trained for (max_position_embeddings, a GGUF's context_length), or with RoPE scaling
// configured (its files' or --rope-scaling's) the scaled one, original x factor for linear and
// YaRN (vLLM's derived max_model_len), Llama 3's max_position_embeddings as its file states it.
#ifndef PAGODA_ROUTER_CORE_MODEL_LENGTH_H_
#define PAGODA_ROUTER_CORE_MODEL_LENGTH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model/model_config.h"

namespace pagoda {

// OK for 0 (the model's context) and 1..config.max_seq_len; INVALID_ARGUMENT naming
// --max-model-len otherwise, and --rope-scaling when no scaling is configured.
absl::Status CheckMaxModelLen(int max_model_len, const ModelConfig& config);

// "" when a worker's KV pool (num_blocks x block_size tokens of kv_dtype) holds one sequence of
// max_model_len tokens; else the warning the router logs when that worker joins, naming both
// sizes and what to change. Such a worker still serves the requests that fit its pool (the
// scheduler refuses the others by their size), so it is warned about, not refused.
std::string KvPoolShortfall(int max_model_len, int64_t num_blocks, int block_size,
                            absl::string_view kv_dtype);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_MODEL_LENGTH_H_
