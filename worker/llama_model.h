// The Llama forward pass over one flattened batch of T tokens from many sequences (DESIGN §6):
//
//   x ─ RMSNorm ─ QKV (fused) ─ [q/k RMSNorm per head] ─ RoPE ─ K,V → slots ─ paged attention ─ O
//   (+x)
//     ─ RMSNorm ─ gate|up (fused) ─ SiLU(gate)·up ─ down (+x)        per layer, then
//   final RMSNorm ─ classifier                                      only for rows that sample
//
// A pipeline stage (issue 40) holds a range of the layers: the first stage starts from the token
// embedding, the others from the residual stream the stage before handed on (ForwardBatch's
// hidden_in); the last ends with the final norm and the classifier, the others hand on their
// residual stream (residual()). A chain of stages computes what the whole model does, bit for
// bit: the same operations over the same rows in the same order.
//
// Weights are packed into the GEMM kernel's panels once at Create; every activation buffer is sized
// once from max_num_batched_tokens. Forward allocates nothing. Not thread-safe: one caller.
#ifndef PAGODA_WORKER_LLAMA_MODEL_H_
#define PAGODA_WORKER_LLAMA_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_range.h"
#include "common/model/model_weights.h"
#include "common/model/weight_source.h"
#include "worker/kernels/kernels.h"
#include "worker/kv_pool.h"
#include "worker/linear.h"
#include "worker/packed_lora.h"
#include "worker/paged_attention.h"
#include "worker/stacked_linear.h"

namespace pagoda {

// The rows of a step one LoRA adapter applies to (ascending, distinct).
struct LoraRows {
  const PackedLora* lora;  // Not owned.
  std::span<const int> rows;
};

// One step's tokens, flattened. All spans are borrowed for the duration of Forward.
struct ForwardBatch {
  std::span<const int> token_ids;           // (T)
  std::span<const int> positions;           // (T) position of each token in its sequence
  std::span<const int64_t> slots;           // (T) KV slot each token's K/V is written to
  std::span<const AttentionSequence> seqs;  // rows of each sequence and its block table
  std::span<const int> logit_rows;          // (S) rows whose logits are wanted
  // (H) rows whose final norm's output (the hidden state before the LM head) is wanted
  // without logits: embeddings. S + H <= max_logit_rows.
  std::span<const int> hidden_rows = {};
  // Rows that run through an adapter, each adapter once: every target matmul adds its low-rank
  // update over them after the base's over all rows. Empty: the base model alone.
  std::span<const LoraRows> loras = {};
  // (T, dim): the residual stream the stage before this one handed on (residual()). Required
  // unless this model holds the first layer; ignored (the embedding is looked up) if it does.
  const float* hidden_in = nullptr;
};

class LlamaModel {
 public:
  // How to store a matrix the checkpoint stored as `stored` (a per-tensor --weight-dtype=auto,
  // or one dtype for all).
  using WeightDtypeChoice = std::function<WeightDtype(GgmlType stored)>;

  // Packs every matrix straight from `source`'s views (the embedding, each layer's, the
  // classifier) in the dtype `choose` gives its stored type, releasing each view's file pages
  // once packed; norms and biases stay f32. `max_tokens`: the largest T; `max_logit_rows`: the
  // largest S + H. `compute`: what bf16 matrices are multiplied in (Linear's).
  // `on_packed` (may be empty) hears the bytes of the source's tensors as each is packed: the
  // load's progress. `layers`: the stage's range (CheckLayerRange's error otherwise); only its
  // layers' tensors, and the embedding or the classifier where the range holds them, are read.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      const WeightSource& source, int max_tokens, int max_logit_rows,
      const WeightDtypeChoice& choose, ComputeDtype compute = ComputeDtype::kF32,
      const std::function<void(int64_t bytes)>& on_packed = nullptr,
      std::optional<LayerRange> layers = std::nullopt);
  // Over f32 weights (tests), every matrix as `dtype`.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      ModelWeights weights, int max_tokens, int max_logit_rows,
      WeightDtype dtype = WeightDtype::kF32, ComputeDtype compute = ComputeDtype::kF32);

  // Runs the batch, writing K/V into `kv` (layer i of kv is layers().begin + i), and returns
  // logits (S, vocab_size): scratch that is valid (and the caller's to modify, e.g. by the
  // sampler) until the next call; null, with residual() set, unless this model holds the last
  // layer. REQUIRES: T <= max_tokens, S <= max_logit_rows, ids < vocab_size, positions <
  // max_seq_len, slots and block tables inside `kv`, kv.num_layers() == layers().size()
  // (the caller validates requests); batch.hidden_in unless layers().first().
  float* Forward(const ForwardBatch& batch, KvPool& kv);
  // (T, dim): the residual stream after the last Forward's last layer, what the next stage's
  // hidden_in takes. Valid until the next call.
  const float* residual() const { return x_.get(); }
  // The final norm's output (S + H, dim) of the last Forward: the logit rows', then the hidden
  // rows'. Valid until the next call.
  const float* final_hidden() const { return final_x_.get(); }

  // The whole model's config (a stage's too: its fingerprint is the model's).
  const ModelConfig& config() const { return config_; }
  LayerRange layers() const { return layers_range_; }
  bool holds_first_layer() const { return layers_range_.first(); }
  bool holds_last_layer() const { return layers_range_.last(config_.num_layers); }
  int max_tokens() const { return max_tokens_; }
  int max_logit_rows() const { return max_logit_rows_; }
  // The classifier's dtype (every matrix's unless auto chose per tensor); a stage without the
  // classifier, its first layer's output projection's.
  WeightDtype weight_dtype() const {
    return classifier_ ? classifier_->dtype() : layers_.front().o->dtype();
  }
  // Matrices stored in each dtype, as "int8 ×150, f32 ×4" (most first): the load log's.
  std::string DescribeWeightDtypes() const;
  // Bytes of every matrix as stored, with norms and biases.
  size_t weight_bytes() const;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;  // (dim)
    std::vector<float> q_norm, k_norm;       // (head_dim); empty unless config.qk_norm
    std::unique_ptr<StackedLinear> qkv;      // dim -> q_dim + 2 kv_dim
    std::unique_ptr<Linear> o;               // q_dim -> dim, accumulates into x
    std::unique_ptr<StackedLinear> gate_up;  // dim -> 2 hidden_dim  ([gate | up])
    std::unique_ptr<Linear> down;            // hidden_dim -> dim, accumulates into x
  };

  LlamaModel(ModelConfig config, int max_tokens, int max_logit_rows, LayerRange layers);
  // Qwen3: RMSNorm over each q and k head of `rows` rows of qkv, in place.
  void NormQk(const Layer& layer, float* qkv, int rows) const;
  void ApplyRope(float* qkv, std::span<const int> positions, int rows) const;
  // Each adapter's update of `target` in `layer` over its rows: y[r] += ΔW · x[r].
  void ApplyLoras(std::span<const LoraRows> loras, int layer, LoraTarget target, const float* x,
                  float* y, int ldy) const;

  // Constant after construction.
  ModelConfig config_;
  int max_tokens_, max_logit_rows_;
  LayerRange layers_range_;  // layers_[i] is the model's layer layers_range_.begin + i
  const Kernels& kernels_;   // the table the Linears were packed for
  // (vocab, dim), looked up by Row; null when tied to the classifier, which then serves both,
  // or when this stage does not hold the first layer.
  std::unique_ptr<Linear> token_embedding_;
  std::vector<Layer> layers_;
  std::vector<float> final_norm_;           // (dim); empty unless it holds the last layer
  std::unique_ptr<Linear> classifier_;      // dim -> vocab; null unless it holds the last layer
  std::vector<float> rope_cos_, rope_sin_;  // (max_seq_len, head_dim / 2)

  // Mutable run state, sized once and left uninitialised: a page is faulted in by the first
  // step that reaches its rows, so loading holds none of it (~100 MiB at 512 batched tokens
  // of a 1B model) and short steps never hold the rows they do not use.
  using Buffer = std::unique_ptr<float[]>;
  Buffer x_;        // (max_tokens, dim) residual stream
  Buffer xb_;       // (max_tokens, dim) normed input of a sublayer
  Buffer qkv_;      // (max_tokens, q_dim + 2 kv_dim)
  Buffer att_;      // (max_tokens, q_dim) attention output
  Buffer gate_up_;  // (max_tokens, 2 hidden_dim)
  Buffer hidden_;   // (max_tokens, hidden_dim)
  Buffer final_x_;  // (max_logit_rows, dim): logit rows, then hidden rows
  Buffer logits_;   // (max_logit_rows, vocab)
  // LoRA's gathers (PackedLora::Apply), touched only by steps with adapters.
  Buffer lora_t_;  // (max_tokens, kMaxLoraRank)
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LLAMA_MODEL_H_
