// An independent float64 forward pass of a Llama-family model, written the way Hugging Face's
// modeling code reads (one token at a time, plain loops, no KV pool, no packing), for checking
// Pagoda's logits against the same tensors.
#ifndef PAGODA_TESTS_COMMON_MODEL_REFERENCE_MODEL_H_
#define PAGODA_TESTS_COMMON_MODEL_REFERENCE_MODEL_H_

#include <vector>

#include "common/model/model_weights.h"

namespace pagoda::testing {

// Logits (tokens.size(), vocab_size) of every position of one sequence. Honours the config's
// RoPE style and scaling (linear, Llama 3, YaRN), GQA, q/k/v biases, q/k norms and tied embeddings.
// RoPE's frequency of pair i and its cos/sin multiplier, transcribed from transformers'
// modeling_rope_utils.py (its _compute_*_parameters) without reading ModelConfig's own.
double ReferenceRopeFrequency(const ModelConfig& c, int i);
double ReferenceRopeAttentionFactor(const ModelConfig& c);

std::vector<double> ReferenceLogits(const ModelWeights& w, const std::vector<int>& tokens);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_COMMON_MODEL_REFERENCE_MODEL_H_
