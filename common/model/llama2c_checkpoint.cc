#include "common/model/llama2c_checkpoint.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/model/mapped_file.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr int kHeaderInts = 7;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// The header's names for the fields ModelConfig::Validate() checks.
const ModelConfigKeys& HeaderKeys() {
  static const ModelConfigKeys* const kKeys =
      new ModelConfigKeys{.num_layers = "n_layers",
                          .num_heads = "n_heads",
                          .num_kv_heads = "n_kv_heads",
                          .head_dim = "head size (dim / n_heads)",
                          .vocab_size = "|vocab_size|",
                          .max_seq_len = "seq_len"};
  return *kKeys;
}

// Opens `path`, parses and checks the header and the file size. On success `file` is
// positioned after the header and `*size` holds the file size.
absl::StatusOr<ModelConfig> ReadHeader(const std::string& path, File& file, int64_t* size_out) {
  file.reset(std::fopen(path.c_str(), "rb"));
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open checkpoint"));
  if (std::fseek(file.get(), 0, SEEK_END) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a seekable file"));
  }
  const int64_t size = std::ftell(file.get());
  std::rewind(file.get());
  int32_t h[kHeaderInts];
  if (size < static_cast<int64_t>(sizeof(h)) ||
      std::fread(h, sizeof(int32_t), kHeaderInts, file.get()) != kHeaderInts) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated checkpoint: ", size, " bytes, header needs 28"));
  }
  ModelConfig c;
  c.name = path;
  c.tied_embeddings = h[5] > 0;
  ModelShape shape = {.dim = h[0],
                      .hidden_dim = h[1],
                      .num_layers = h[2],
                      .num_heads = h[3],
                      .num_kv_heads = h[4],
                      .vocab_size = std::abs(int64_t{h[5]}),
                      .max_seq_len = h[6]};
  shape.head_dim = shape.DimPerHead();  // not in the file
  c.SetShape(shape);
  c.rope_style = RopeStyle::kInterleaved;
  c.bos_id = 1;
  c.eos_ids = {1, 2};
  RETURN_IF_ERROR(c.Validate(path + ": bad header", HeaderKeys()));
  if (c.dim != c.num_heads * c.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: dim ", c.dim,
                                                   " is not n_heads ", c.num_heads,
                                                   " x an even head size"));
  }

  const int64_t dim = c.dim, hidden = c.hidden_dim, layers = c.num_layers, kv_dim = c.kv_dim();
  const int64_t per_layer = 2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * dim * hidden;
  const int64_t floats = c.vocab_size * dim + layers * per_layer + dim +
                         static_cast<int64_t>(c.max_seq_len) * c.head_dim +
                         (c.tied_embeddings ? 0 : c.vocab_size * dim);
  const int64_t expected = kHeaderInts * 4 + floats * 4;
  if (size > expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": oversized checkpoint: ", size,
                                                   " bytes where the header implies ", expected));
  }

  *size_out = size;
  return c;
}

const LlamaTensorNames& Llama2cTensorNames() {
  static const LlamaTensorNames names{
      .embedding = "token_embedding_table",
      .final_norm = "rms_final_weight",
      .classifier = "wcls",
      .layer_prefix = "layer ",
      .attn_norm = "rms_att_weight",
      .wq = "wq",
      .wk = "wk",
      .wv = "wv",
      .wo = "wo",
      .bq = "",  // the format has no biases or q/k norms
      .bk = "",
      .bv = "",
      .q_norm = "",
      .k_norm = "",
      .ffn_norm = "rms_ffn_weight",
      .w_gate = "w1",
      .w_up = "w3",
      .w_down = "w2",
  };
  return names;
}

}  // namespace

absl::StatusOr<ModelConfig> LoadLlama2cConfig(const std::string& path) {
  File file;
  int64_t size;
  return ReadHeader(path, file, &size);
}

absl::StatusOr<std::unique_ptr<WeightSource>> OpenLlama2cSource(const std::string& path) {
  File file;
  int64_t size;
  ASSIGN_OR_RETURN(ModelConfig c, ReadHeader(path, file, &size));
  const int64_t dim = c.dim, hidden = c.hidden_dim, kv_dim = c.kv_dim();
  // Each tensor's first float: the file stores each one for all layers before the next.
  const LlamaTensorNames& n = Llama2cTensorNames();
  std::map<std::string, int64_t> offsets;
  int64_t offset = kHeaderInts * sizeof(int32_t);
  auto place = [&](const std::string& name, int64_t floats) -> absl::Status {
    offsets[name] = offset;
    if (offset + floats * 4 > size && (name != n.classifier || !c.tied_embeddings)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": truncated checkpoint: ", name, " needs bytes [", offset, ", ",
                       offset + floats * 4, ") but the file has ", size));
    }
    offset += floats * static_cast<int64_t>(sizeof(float));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(place(n.embedding, c.vocab_size * dim));
  const std::pair<const std::string*, int64_t> fields[] = {
      {&n.attn_norm, dim},       {&n.wq, dim * dim},        {&n.wk, kv_dim * dim},
      {&n.wv, kv_dim * dim},     {&n.wo, dim * dim},        {&n.ffn_norm, dim},
      {&n.w_gate, hidden * dim}, {&n.w_down, dim * hidden}, {&n.w_up, hidden * dim}};
  for (const auto& [suffix, floats] : fields) {
    for (int l = 0; l < c.num_layers; ++l)
      RETURN_IF_ERROR(place(absl::StrCat(n.layer_prefix, l, ".", *suffix), floats));
  }
  RETURN_IF_ERROR(place(n.final_norm, dim));
  RETURN_IF_ERROR(place("freq_cis", static_cast<int64_t>(c.max_seq_len) * c.head_dim));
  RETURN_IF_ERROR(place(n.classifier, c.vocab_size * dim));
  ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> map,
                   MappedFile::Open(fileno(file.get()), path, size));
  return WeightSource::Create(
      std::move(c), n,
      [&](const std::string& name, std::span<const int64_t> shape) -> absl::StatusOr<TensorView> {
        int64_t floats = 1;  // placed above, so inside the file
        for (int64_t d : shape) floats *= d;
        return TensorView{.type = GgmlType::kF32,
                          .rows = floats / shape.back(),
                          .cols = shape.back(),
                          .data = map->data() + offsets.at(name)};
      },
      map, /*mapped=*/true);
}

absl::StatusOr<ModelWeights> LoadLlama2cCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, OpenLlama2cSource(path));
  return ToModelWeights(*source);
}

absl::Status WriteLlama2cCheckpoint(const ModelWeights& w, const std::string& path) {
  const ModelConfig& c = w.config;
  if (c.qkv_bias || c.qk_norm || c.rope_scaling.enabled() ||
      c.rope_style != RopeStyle::kInterleaved || c.q_dim() != c.dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": the llama2.c format cannot hold this model (biases, q/k norms, RoPE scaling, "
        "rotate-half RoPE or heads x head_dim != dim)"));
  }
  File file(std::fopen(path.c_str(), "wb"));
  if (!file) return absl::InternalError(absl::StrCat(path, ": cannot create"));
  const int32_t h[kHeaderInts] = {c.dim,          c.hidden_dim,
                                  c.num_layers,   c.num_heads,
                                  c.num_kv_heads, c.tied_embeddings ? c.vocab_size : -c.vocab_size,
                                  c.max_seq_len};
  bool ok = std::fwrite(h, sizeof(int32_t), kHeaderInts, file.get()) == kHeaderInts;
  auto put = [&](const std::vector<float>& v) {
    ok = ok && std::fwrite(v.data(), sizeof(float), v.size(), file.get()) == v.size();
  };
  put(w.token_embedding);
  for (auto m : {&LayerWeights::attn_norm, &LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv,
                 &LayerWeights::wo, &LayerWeights::ffn_norm, &LayerWeights::w_gate,
                 &LayerWeights::w_down, &LayerWeights::w_up}) {
    for (const LayerWeights& l : w.layers) put(l.*m);
  }
  put(w.final_norm);
  put(std::vector<float>(static_cast<size_t>(c.max_seq_len) * c.head_dim, 0.0f));
  if (!c.tied_embeddings) put(w.classifier);
  if (!ok || std::fflush(file.get()) != 0) {
    return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda
