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

absl::Status ReadLlamaWeights(const LlamaTensorNames& names, const TensorReader& read_tensor,
                              ModelWeights* w) {
  const ModelConfig& c = w->config;
  const int64_t dim = c.dim, hidden = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  auto read = [&](const std::string& name, std::vector<int64_t> shape,
                  std::vector<float>* out) -> absl::Status {
    ASSIGN_OR_RETURN(*out, read_tensor(name, std::move(shape)));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(read(names.embedding, {c.vocab_size, dim}, &w->token_embedding));
  RETURN_IF_ERROR(read(names.final_norm, {dim}, &w->final_norm));
  if (!c.tied_embeddings) {
    RETURN_IF_ERROR(read(names.classifier, {c.vocab_size, dim}, &w->classifier));
  }
  w->layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w->layers[l];
    const std::string p = absl::StrCat(names.layer_prefix, l, ".");
    RETURN_IF_ERROR(read(p + names.attn_norm, {dim}, &L.attn_norm));
    RETURN_IF_ERROR(read(p + names.wq, {q, dim}, &L.wq));
    RETURN_IF_ERROR(read(p + names.wk, {kv, dim}, &L.wk));
    RETURN_IF_ERROR(read(p + names.wv, {kv, dim}, &L.wv));
    RETURN_IF_ERROR(read(p + names.wo, {dim, q}, &L.wo));
    if (c.qkv_bias) {
      RETURN_IF_ERROR(read(p + names.bq, {q}, &L.bq));
      RETURN_IF_ERROR(read(p + names.bk, {kv}, &L.bk));
      RETURN_IF_ERROR(read(p + names.bv, {kv}, &L.bv));
    }
    if (c.qk_norm) {
      RETURN_IF_ERROR(read(p + names.q_norm, {c.head_dim}, &L.q_norm));
      RETURN_IF_ERROR(read(p + names.k_norm, {c.head_dim}, &L.k_norm));
    }
    RETURN_IF_ERROR(read(p + names.ffn_norm, {dim}, &L.ffn_norm));
    RETURN_IF_ERROR(read(p + names.w_gate, {hidden, dim}, &L.w_gate));
    RETURN_IF_ERROR(read(p + names.w_up, {hidden, dim}, &L.w_up));
    RETURN_IF_ERROR(read(p + names.w_down, {dim, hidden}, &L.w_down));
  }
  return absl::OkStatus();
}

}  // namespace pagoda
