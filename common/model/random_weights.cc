#include "common/model/random_weights.h"

#include <cmath>
#include <random>

namespace pagoda {
namespace {

std::vector<float> Uniform(std::mt19937_64& rng, size_t n, int fan_in) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng) * scale;
  return v;
}

}  // namespace

ModelWeights RandomModelWeights(const ModelConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t dim = c.dim, hidden = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  ModelWeights w;
  w.config = c;
  w.token_embedding = Uniform(rng, c.vocab_size * dim, 1);
  w.layers.resize(c.num_layers);
  for (LayerWeights& l : w.layers) {
    l.attn_norm.assign(dim, 1.0f);
    l.ffn_norm.assign(dim, 1.0f);
    if (c.qk_norm) {
      l.q_norm = Uniform(rng, c.head_dim, 1);
      l.k_norm = Uniform(rng, c.head_dim, 1);
      for (float& x : l.q_norm) x += 1.0f;  // around 1, as trained norms are
      for (float& x : l.k_norm) x += 1.0f;
    }
    l.wq = Uniform(rng, q * dim, dim);
    l.wk = Uniform(rng, kv * dim, dim);
    l.wv = Uniform(rng, kv * dim, dim);
    l.wo = Uniform(rng, dim * q, q);
    l.w_gate = Uniform(rng, hidden * dim, dim);
    l.w_down = Uniform(rng, dim * hidden, hidden);
    l.w_up = Uniform(rng, hidden * dim, dim);
  }
  w.final_norm.assign(dim, 1.0f);
  if (!c.tied_embeddings) w.classifier = Uniform(rng, c.vocab_size * dim, dim);
  return w;
}

bool NamedModelConfig(const std::string& name, ModelConfig* c) {
  struct Shape {
    const char* name;
    int dim, hidden, layers, heads, kv_heads, vocab, seq;
    float rope_theta = 10000.0f;
    bool tied = true;
  };
  static constexpr Shape kShapes[] = {
      {"stories260K", 64, 172, 5, 8, 4, 512, 512},
      {"stories15M", 288, 768, 6, 6, 6, 32000, 256},
      {"stories42M", 512, 1376, 8, 8, 8, 32000, 1024},
      {"stories110M", 768, 2048, 12, 12, 12, 32000, 1024},
      {"1B", 2048, 5632, 22, 32, 4, 32000, 2048},  // TinyLlama-1.1B
      // Llama-3-8B: 16 GB in 16 bits, so pagoda-make-model streams it to a GGUF file
      // (--format=gguf) rather than holding it (RandomModelWeights's f32 would take 32 GB).
      {"8B", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, false},
  };
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    *c = ModelConfig();
    c->name = name;
    c->dim = s.dim;
    c->hidden_dim = s.hidden;
    c->num_layers = s.layers;
    c->num_heads = s.heads;
    c->num_kv_heads = s.kv_heads;
    c->head_dim = s.dim / s.heads;
    c->vocab_size = s.vocab;
    c->max_seq_len = s.seq;
    c->rope_theta = s.rope_theta;
    c->tied_embeddings = s.tied;
    c->eos_ids = s.vocab > 128001 ? std::vector<int>{128001, 128009} : std::vector<int>{1, 2};
    return true;
  }
  return false;
}

}  // namespace pagoda
