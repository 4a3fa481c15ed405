// Model weights widened to float32, in the checkpoint's [out, in] row-major layout: what
// reference code, tests and the random-model generator handle. The worker does not load
// through it: it packs each matrix from the file's own bytes (common/model/weight_source.h).
#ifndef PAGODA_COMMON_MODEL_MODEL_WEIGHTS_H_
#define PAGODA_COMMON_MODEL_MODEL_WEIGHTS_H_

#include <vector>

#include "common/model/model_config.h"

namespace pagoda {

struct LayerWeights {
  std::vector<float> attn_norm;       // (dim)
  std::vector<float> wq;              // (q_dim, dim)
  std::vector<float> wk;              // (kv_dim, dim)
  std::vector<float> wv;              // (kv_dim, dim)
  std::vector<float> wo;              // (dim, q_dim)
  std::vector<float> bq, bk, bv;      // (q_dim), (kv_dim), (kv_dim); empty when the model has none
  std::vector<float> q_norm, k_norm;  // (head_dim) each; empty unless config.qk_norm
  std::vector<float> ffn_norm;        // (dim)
  std::vector<float> w_gate;          // (hidden_dim, dim)   llama2.c's w1
  std::vector<float> w_down;          // (dim, hidden_dim)   llama2.c's w2
  std::vector<float> w_up;            // (hidden_dim, dim)   llama2.c's w3
};

// How a checkpoint stores its matrices (the first layer's q projection), before they are
// widened to the float32 of ModelWeights: what the worker's --weight-dtype=auto follows.
enum class StoredPrecision { kF32, kF16, kBf16, kQuantized };

struct ModelWeights {
  ModelConfig config;
  StoredPrecision stored_precision = StoredPrecision::kF32;
  std::vector<float> token_embedding;  // (vocab_size, dim)
  std::vector<LayerWeights> layers;    // (num_layers)
  std::vector<float> final_norm;       // (dim)
  std::vector<float> classifier;       // (vocab_size, dim); empty when tied to the embedding
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_MODEL_WEIGHTS_H_
