#include "common/model/llama_weights_reader.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {

const LlamaTensorNames& HfTensorNames() {
  static const LlamaTensorNames names{
      .embedding = "model.embed_tokens.weight",
      .final_norm = "model.norm.weight",
      .classifier = "lm_head.weight",
      .layer_prefix = "model.layers.",
      .attn_norm = "input_layernorm.weight",
      .wq = "self_attn.q_proj.weight",
      .wk = "self_attn.k_proj.weight",
      .wv = "self_attn.v_proj.weight",
      .wo = "self_attn.o_proj.weight",
      .bq = "self_attn.q_proj.bias",
      .bk = "self_attn.k_proj.bias",
      .bv = "self_attn.v_proj.bias",
      .q_norm = "self_attn.q_norm.weight",
      .k_norm = "self_attn.k_norm.weight",
      .ffn_norm = "post_attention_layernorm.weight",
      .w_gate = "mlp.gate_proj.weight",
      .w_up = "mlp.up_proj.weight",
      .w_down = "mlp.down_proj.weight",
  };
  return names;
}

const LlamaTensorNames& GgufTensorNames() {
  static const LlamaTensorNames names{
      .embedding = "token_embd.weight",
      .final_norm = "output_norm.weight",
      .classifier = "output.weight",
      .layer_prefix = "blk.",
      .attn_norm = "attn_norm.weight",
      .wq = "attn_q.weight",
      .wk = "attn_k.weight",
      .wv = "attn_v.weight",
      .wo = "attn_output.weight",
      .bq = "attn_q.bias",
      .bk = "attn_k.bias",
      .bv = "attn_v.bias",
      .q_norm = "attn_q_norm.weight",
      .k_norm = "attn_k_norm.weight",
      .ffn_norm = "ffn_norm.weight",
      .w_gate = "ffn_gate.weight",
      .w_up = "ffn_up.weight",
      .w_down = "ffn_down.weight",
  };
  return names;
}

std::vector<LlamaTensorSpec> LlamaTensorSpecs(const LlamaTensorNames& names, const ModelConfig& c) {
  const int64_t dim = c.dim, hidden = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  using T = LlamaTensor;
  std::vector<LlamaTensorSpec> specs = {{T::kEmbedding, -1, names.embedding, {c.vocab_size, dim}},
                                        {T::kFinalNorm, -1, names.final_norm, {dim}}};
  if (!c.tied_embeddings) {
    specs.push_back({T::kClassifier, -1, names.classifier, {c.vocab_size, dim}});
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat(names.layer_prefix, l, ".");
    auto add = [&](T t, const std::string& suffix, std::vector<int64_t> shape) {
      specs.push_back({t, l, p + suffix, std::move(shape)});
    };
    add(T::kAttnNorm, names.attn_norm, {dim});
    add(T::kWq, names.wq, {q, dim});
    add(T::kWk, names.wk, {kv, dim});
    add(T::kWv, names.wv, {kv, dim});
    add(T::kWo, names.wo, {dim, q});
    if (c.qkv_bias) {
      add(T::kBq, names.bq, {q});
      add(T::kBk, names.bk, {kv});
      add(T::kBv, names.bv, {kv});
    }
    if (c.qk_norm) {
      add(T::kQNorm, names.q_norm, {c.head_dim});
      add(T::kKNorm, names.k_norm, {c.head_dim});
    }
    add(T::kFfnNorm, names.ffn_norm, {dim});
    add(T::kGate, names.w_gate, {hidden, dim});
    add(T::kUp, names.w_up, {hidden, dim});
    add(T::kDown, names.w_down, {dim, hidden});
  }
  return specs;
}

std::vector<float>* LlamaWeightSlot(LlamaTensor tensor, int layer, ModelWeights* w) {
  switch (tensor) {
    case LlamaTensor::kEmbedding:
      return &w->token_embedding;
    case LlamaTensor::kFinalNorm:
      return &w->final_norm;
    case LlamaTensor::kClassifier:
      return &w->classifier;
    default:
      break;
  }
  LayerWeights& L = w->layers[layer];
  switch (tensor) {
    case LlamaTensor::kAttnNorm:
      return &L.attn_norm;
    case LlamaTensor::kWq:
      return &L.wq;
    case LlamaTensor::kWk:
      return &L.wk;
    case LlamaTensor::kWv:
      return &L.wv;
    case LlamaTensor::kWo:
      return &L.wo;
    case LlamaTensor::kBq:
      return &L.bq;
    case LlamaTensor::kBk:
      return &L.bk;
    case LlamaTensor::kBv:
      return &L.bv;
    case LlamaTensor::kQNorm:
      return &L.q_norm;
    case LlamaTensor::kKNorm:
      return &L.k_norm;
    case LlamaTensor::kFfnNorm:
      return &L.ffn_norm;
    case LlamaTensor::kGate:
      return &L.w_gate;
    case LlamaTensor::kUp:
      return &L.w_up;
    default:
      return &L.w_down;
  }
}

const std::vector<float>* LlamaWeightSlot(LlamaTensor tensor, int layer, const ModelWeights& w) {
  return LlamaWeightSlot(tensor, layer, const_cast<ModelWeights*>(&w));
}

}  // namespace pagoda
