// --max-model-len against the model: a length above the context the model was trained for is
// refused (as vLLM does), not silently cut to it. Pagoda has no RoPE-scaling option to stretch
// a model's context, so the model's own max_seq_len (max_position_embeddings, a GGUF's
// context_length; with Llama 3's rope_scaling already the scaled length) is the limit.
#ifndef PAGODA_ROUTER_CORE_MODEL_LENGTH_H_
#define PAGODA_ROUTER_CORE_MODEL_LENGTH_H_

#include "absl/status/status.h"
#include "common/model/model_config.h"

namespace pagoda {

// OK for 0 (the model's context) and 1..config.max_seq_len; INVALID_ARGUMENT naming
// --max-model-len otherwise.
absl::Status CheckMaxModelLen(int max_model_len, const ModelConfig& config);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_MODEL_LENGTH_H_
