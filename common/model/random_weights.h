// Random-weight models of any shape, for tests and benchmarks (values don't matter for speed).
#ifndef PAGODA_COMMON_MODEL_RANDOM_WEIGHTS_H_
#define PAGODA_COMMON_MODEL_RANDOM_WEIGHTS_H_

#include <cstdint>

#include "common/model/model_weights.h"

namespace pagoda {

// Weights ~ U(-scale, scale) with scale ≈ 1/sqrt(fan_in) (so activations stay O(1)); norms are 1.
ModelWeights RandomModelWeights(const ModelConfig& config, uint64_t seed);

// llama2.c-style config for a named shape: "stories260K", "stories15M", "stories42M",
// "stories110M", "1B" (TinyLlama's shape) or "8B" (Llama 3's). Returns false for an unknown name.
bool NamedModelConfig(const std::string& name, ModelConfig* config);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_RANDOM_WEIGHTS_H_
