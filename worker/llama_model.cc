#include "worker/llama_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/kernels/isa.h"

namespace pagoda {
namespace {

// Element-wise work (embedding rows, norms, RoPE, SwiGLU) of fewer rows runs on the calling
// thread: waking the team for a decode's row costs more than the row (a futex wake per thread
// with the passive waits served workers use), and a step has nine such loops per layer.
constexpr int kParallelRows = 16;

// The Linears of one model, each packed from its views and then done with them.
class Packer {
 public:
  Packer(const WeightSource& source, const LlamaModel::WeightDtypeChoice& choose,
         ComputeDtype compute, const std::function<void(int64_t)>& on_packed)
      : source_(source), choose_(choose), compute_(compute), on_packed_(on_packed) {}

  std::unique_ptr<StackedLinear> Stacked(std::initializer_list<LlamaTensor> tensors, int layer,
                                         const std::vector<float>& bias) {
    std::vector<TensorView> views;
    std::vector<WeightDtype> dtypes;
    for (LlamaTensor t : tensors) {
      views.push_back(source_.View(t, layer));
      dtypes.push_back(choose_(source_.StoredType(t, layer)));
    }
    auto linear =
        std::make_unique<StackedLinear>(views, dtypes, bias, /*accumulate=*/false, compute_);
    for (LlamaTensor t : tensors) source_.Release(t, layer);
    for (const TensorView& view : views) Packed(view);
    return linear;
  }

  std::unique_ptr<Linear> Single(LlamaTensor tensor, int layer, bool accumulate) {
    const TensorView view = source_.View(tensor, layer);
    auto linear =
        std::make_unique<Linear>(std::span<const TensorView>(&view, 1), std::vector<float>(),
                                 accumulate, choose_(source_.StoredType(tensor, layer)), compute_);
    source_.Release(tensor, layer);
    Packed(view);
    return linear;
  }

 private:
  void Packed(const TensorView& view) {
    if (on_packed_) on_packed_(static_cast<int64_t>(view.num_bytes()));
  }

  const WeightSource& source_;
  const LlamaModel::WeightDtypeChoice& choose_;
  ComputeDtype compute_;
  const std::function<void(int64_t)>& on_packed_;
};

// Bytes of a Linear's packed panels must fit its int indices: every matrix has fewer than
// 2^31 rows and columns.
absl::Status CheckSizes(const WeightSource& source) {
  const ModelConfig& c = source.config();
  for (int64_t n : {int64_t{c.dim}, int64_t{c.hidden_dim}, int64_t{c.vocab_size},
                    int64_t{c.q_dim()} + 2 * c.kv_dim(), 2 * int64_t{c.hidden_dim}}) {
    if (n <= 0 || n >= (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(absl::StrCat("a matrix of ", n, " rows or columns"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, int max_tokens, int max_logit_rows, LayerRange layers)
    : config_(std::move(config)),
      max_tokens_(max_tokens),
      max_logit_rows_(max_logit_rows),
      layers_range_(layers),
      kernels_(ActiveKernels()) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(ModelWeights weights, int max_tokens,
                                                               int max_logit_rows,
                                                               WeightDtype dtype,
                                                               ComputeDtype compute) {
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source,
                   WeightSource::FromWeights(std::move(weights)));
  return Create(
      *source, max_tokens, max_logit_rows, [dtype](GgmlType) { return dtype; }, compute);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    const WeightSource& source, int max_tokens, int max_logit_rows, const WeightDtypeChoice& choose,
    ComputeDtype compute, const std::function<void(int64_t)>& on_packed,
    std::optional<LayerRange> layers) {
  const ModelConfig& c = source.config();
  const LayerRange range = layers.value_or(LayerRange{0, c.num_layers});
  RETURN_IF_ERROR(CheckLayerRange(range, c.num_layers));
  if (max_tokens <= 0 || max_logit_rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_tokens ", max_tokens, " and max_logit_rows ", max_logit_rows, " must be positive"));
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("weights do not match their config");
  RETURN_IF_ERROR(CheckSizes(source));
  auto model = std::unique_ptr<LlamaModel>(new LlamaModel(c, max_tokens, max_logit_rows, range));
  const int dim = c.dim, hidden = c.hidden_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const int qkv_dim = q_dim + 2 * kv_dim;
  using T = LlamaTensor;
  Packer pack(source, choose, compute, on_packed);
  for (int l = range.begin; l < range.end; ++l) {
    Layer layer;
    layer.q_norm = source.Floats(T::kQNorm, l);
    layer.k_norm = source.Floats(T::kKNorm, l);
    layer.attn_norm = source.Floats(T::kAttnNorm, l);
    layer.ffn_norm = source.Floats(T::kFfnNorm, l);
    std::vector<float> qkv_bias;
    for (T bias : {T::kBq, T::kBk, T::kBv}) {
      const std::vector<float> b = source.Floats(bias, l);
      qkv_bias.insert(qkv_bias.end(), b.begin(), b.end());
    }
    layer.qkv = pack.Stacked({T::kWq, T::kWk, T::kWv}, l, qkv_bias);
    layer.o = pack.Single(T::kWo, l, /*accumulate=*/true);
    layer.gate_up = pack.Stacked({T::kGate, T::kUp}, l, {});
    layer.down = pack.Single(T::kDown, l, /*accumulate=*/true);
    model->layers_.push_back(std::move(layer));
  }
  // Tied embeddings: a whole model packs the matrix once, as the classifier that also serves
  // the lookups; a first stage without the last layer packs it as its embedding, a last stage
  // without the first as its classifier.
  const bool first = range.first(), last = range.last(c.num_layers);
  if (last) {
    model->final_norm_ = source.Floats(T::kFinalNorm);
    model->classifier_ = pack.Single(c.tied_embeddings ? T::kEmbedding : T::kClassifier, -1, false);
  }
  if (first && !(last && c.tied_embeddings)) {
    model->token_embedding_ = pack.Single(T::kEmbedding, -1, false);
  }

  // RoPE angles: pair i of a head turns by pos · theta^(-2i/head_dim) (scaling aside),
  // computed in float as llama2.c does; YaRN's attention factor multiplies cos and sin.
  const int half = c.head_dim / 2;
  model->rope_cos_.resize(static_cast<size_t>(c.max_seq_len) * half);
  model->rope_sin_.resize(model->rope_cos_.size());
  std::vector<float> freqs(half);
  for (int i = 0; i < half; ++i) freqs[i] = c.RopeFrequency(i);
  const float m = c.RopeAttentionFactor();
  for (int pos = 0; pos < c.max_seq_len; ++pos) {
    for (int i = 0; i < half; ++i) {
      const float angle = pos * freqs[i];
      model->rope_cos_[static_cast<size_t>(pos) * half + i] = m * std::cos(angle);
      model->rope_sin_[static_cast<size_t>(pos) * half + i] = m * std::sin(angle);
    }
  }

  const size_t t = max_tokens;
  model->x_ = std::make_unique_for_overwrite<float[]>(t * dim);
  model->xb_ = std::make_unique_for_overwrite<float[]>(t * dim);
  model->qkv_ = std::make_unique_for_overwrite<float[]>(t * qkv_dim);
  model->att_ = std::make_unique_for_overwrite<float[]>(t * q_dim);
  model->gate_up_ = std::make_unique_for_overwrite<float[]>(t * 2 * hidden);
  model->hidden_ = std::make_unique_for_overwrite<float[]>(t * hidden);
  model->final_x_ =
      std::make_unique_for_overwrite<float[]>(static_cast<size_t>(max_logit_rows) * dim);
  model->logits_ =
      std::make_unique_for_overwrite<float[]>(static_cast<size_t>(max_logit_rows) * c.vocab_size);
  model->lora_t_ = std::make_unique_for_overwrite<float[]>(t * kMaxLoraRank);
  return model;
}

std::string LlamaModel::DescribeWeightDtypes() const {
  std::map<std::string, int> counts;  // "bf16 (bf16 compute)" apart from widened bf16
  auto count = [&](const Linear& linear) {
    ++counts[absl::StrCat(WeightDtypeName(linear.dtype()),
                          linear.compute_bf16() ? " (bf16 compute)" : "")];
  };
  if (classifier_) count(*classifier_);
  if (token_embedding_) count(*token_embedding_);
  for (const Layer& l : layers_) {
    for (const StackedLinear* s : {l.qkv.get(), l.gate_up.get()}) {
      for (int i = 0; i < s->num_linears(); ++i) count(s->linear(i));
    }
    count(*l.o);
    count(*l.down);
  }
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [name, n] : counts) by_count.push_back({-n, name});
  std::sort(by_count.begin(), by_count.end());
  std::string out;
  for (const auto& [n, name] : by_count)
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, " x", -n);
  return out;
}

size_t LlamaModel::weight_bytes() const {
  size_t bytes = sizeof(float) * final_norm_.size();
  if (classifier_) bytes += classifier_->weight_bytes();
  if (token_embedding_) bytes += token_embedding_->weight_bytes();
  for (const Layer& l : layers_) {
    bytes += l.qkv->weight_bytes() + l.o->weight_bytes() + l.gate_up->weight_bytes() +
             l.down->weight_bytes() + l.qkv->bias_bytes() +
             sizeof(float) *
                 (l.attn_norm.size() + l.ffn_norm.size() + l.q_norm.size() + l.k_norm.size());
  }
  return bytes;
}

void LlamaModel::NormQk(const Layer& layer, float* qkv, int rows) const {
  const int hd = config_.head_dim;
  const int qkv_dim = config_.q_dim() + 2 * config_.kv_dim();
#pragma omp parallel for if (rows >= kParallelRows)
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < config_.num_heads + config_.num_kv_heads; ++h) {
      float* v = qkv + static_cast<size_t>(r) * qkv_dim + h * hd;
      const float* w = h < config_.num_heads ? layer.q_norm.data() : layer.k_norm.data();
      kernels_.rms_norm(v, w, hd, config_.rms_norm_eps, v);
    }
  }
}

void LlamaModel::ApplyRope(float* qkv, std::span<const int> positions, int rows) const {
  const int hd = config_.head_dim, half = hd / 2;
  const int qkv_dim = config_.q_dim() + 2 * config_.kv_dim();
  const int rotated_heads = config_.num_heads + config_.num_kv_heads;  // q heads then k heads
  const bool interleaved = config_.rope_style == RopeStyle::kInterleaved;
#pragma omp parallel for if (rows >= kParallelRows)
  for (int r = 0; r < rows; ++r) {
    const float* cos = &rope_cos_[static_cast<size_t>(positions[r]) * half];
    const float* sin = &rope_sin_[static_cast<size_t>(positions[r]) * half];
    for (int h = 0; h < rotated_heads; ++h) {
      float* v = qkv + static_cast<size_t>(r) * qkv_dim + h * hd;
      for (int i = 0; i < half; ++i) {
        float* a = interleaved ? &v[2 * i] : &v[i];
        float* b = interleaved ? &v[2 * i + 1] : &v[i + half];
        const float x0 = *a, x1 = *b;
        *a = x0 * cos[i] - x1 * sin[i];
        *b = x0 * sin[i] + x1 * cos[i];
      }
    }
  }
}

void LlamaModel::ApplyLoras(std::span<const LoraRows> loras, int layer, LoraTarget target,
                            const float* x, float* y, int ldy) const {
  if (loras.size() == 1) {  // its products split between the threads
    loras[0].lora->Apply(layer, target, x, loras[0].rows, y, ldy, lora_t_.get());
    return;
  }
  // Several adapters: each thread takes whole adapters (their products run on it alone), one
  // region for all instead of one per adapter. Their rows are disjoint, and so are the slices of
  // scratch each gets: its rows' offset among all.
  int offsets[kMaxLorasPerStep + 1] = {0};
  const int n = static_cast<int>(std::min<size_t>(loras.size(), kMaxLorasPerStep));
  for (int g = 0; g < n; ++g) offsets[g + 1] = offsets[g] + static_cast<int>(loras[g].rows.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int g = 0; g < n; ++g) {
    float* t = lora_t_.get() + static_cast<size_t>(offsets[g]) * kMaxLoraRank;
    loras[g].lora->Apply(layer, target, x, loras[g].rows, y, ldy, t);
  }
  // More adapters than that (past any --max-loras a worker takes) run one after another.
  for (size_t g = n; g < loras.size(); ++g) {
    loras[g].lora->Apply(layer, target, x, loras[g].rows, y, ldy, lora_t_.get());
  }
}

float* LlamaModel::Forward(const ForwardBatch& batch, KvPool& kv) {
  const ModelConfig& c = config_;
  const int rows = static_cast<int>(batch.token_ids.size());
  const int dim = c.dim, hidden = c.hidden_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  const int qkv_dim = q_dim + 2 * kv_dim;
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, kv.block_size()};

  if (holds_first_layer()) {
    const Linear& embedding = token_embedding_ ? *token_embedding_ : *classifier_;
#pragma omp parallel for if (rows >= kParallelRows)
    for (int r = 0; r < rows; ++r) {
      embedding.Row(batch.token_ids[r], &x_[static_cast<size_t>(r) * dim]);
    }
  } else {
    std::copy_n(batch.hidden_in, static_cast<size_t>(rows) * dim, x_.get());
  }
  const int num_layers = static_cast<int>(layers_.size());
  for (int i = 0; i < num_layers; ++i) {
    const Layer& layer = layers_[i];
    const int l = layers_range_.begin + i;  // the model's layer (an adapter's index)
#pragma omp parallel for if (rows >= kParallelRows)
    for (int r = 0; r < rows; ++r) {
      kernels_.rms_norm(&x_[static_cast<size_t>(r) * dim], layer.attn_norm.data(), dim,
                        c.rms_norm_eps, &xb_[static_cast<size_t>(r) * dim]);
    }
    layer.qkv->Run(xb_.get(), rows, qkv_.get());
    if (!batch.loras.empty()) {
      ApplyLoras(batch.loras, l, LoraTarget::kQ, xb_.get(), qkv_.get(), qkv_dim);
      ApplyLoras(batch.loras, l, LoraTarget::kK, xb_.get(), qkv_.get() + q_dim, qkv_dim);
      ApplyLoras(batch.loras, l, LoraTarget::kV, xb_.get(), qkv_.get() + q_dim + kv_dim, qkv_dim);
    }
    if (c.qk_norm) NormQk(layer, qkv_.get(), rows);
    ApplyRope(qkv_.get(), batch.positions, rows);
    for (int r = 0; r < rows; ++r) {
      const float* row = &qkv_[static_cast<size_t>(r) * qkv_dim];
      kv.Write(i, batch.slots[r], row + q_dim, row + q_dim + kv_dim);
    }
    PagedAttention(kernels_, shape, batch.seqs, qkv_.get(), qkv_dim, kv.layer(i), att_.get());
    layer.o->Run(att_.get(), rows, x_.get());
    if (!batch.loras.empty()) ApplyLoras(batch.loras, l, LoraTarget::kO, att_.get(), x_.get(), dim);
#pragma omp parallel for if (rows >= kParallelRows)
    for (int r = 0; r < rows; ++r) {
      kernels_.rms_norm(&x_[static_cast<size_t>(r) * dim], layer.ffn_norm.data(), dim,
                        c.rms_norm_eps, &xb_[static_cast<size_t>(r) * dim]);
    }
    layer.gate_up->Run(xb_.get(), rows, gate_up_.get());
    if (!batch.loras.empty()) {
      ApplyLoras(batch.loras, l, LoraTarget::kGate, xb_.get(), gate_up_.get(), 2 * hidden);
      ApplyLoras(batch.loras, l, LoraTarget::kUp, xb_.get(), gate_up_.get() + hidden, 2 * hidden);
    }
#pragma omp parallel for if (rows >= kParallelRows)
    for (int r = 0; r < rows; ++r) {
      const float* gate = &gate_up_[static_cast<size_t>(r) * 2 * hidden];
      const float* up = gate + hidden;
      float* h = &hidden_[static_cast<size_t>(r) * hidden];
      kernels_.swiglu(gate, up, hidden, h);
    }
    layer.down->Run(hidden_.get(), rows, x_.get());
    if (!batch.loras.empty()) {
      ApplyLoras(batch.loras, l, LoraTarget::kDown, hidden_.get(), x_.get(), dim);
    }
  }
  if (!holds_last_layer()) return nullptr;
  const int num_logits = static_cast<int>(batch.logit_rows.size());
  const int num_final = num_logits + static_cast<int>(batch.hidden_rows.size());
#pragma omp parallel for if (num_final >= kParallelRows)
  for (int i = 0; i < num_final; ++i) {
    const int row = i < num_logits ? batch.logit_rows[i] : batch.hidden_rows[i - num_logits];
    kernels_.rms_norm(&x_[static_cast<size_t>(row) * dim], final_norm_.data(), dim, c.rms_norm_eps,
                      &final_x_[static_cast<size_t>(i) * dim]);
  }
  if (num_logits > 0) classifier_->Run(final_x_.get(), num_logits, logits_.get());
  return logits_.get();
}

}  // namespace pagoda
