#include "common/model/llama2c_checkpoint.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr int kHeaderInts = 7;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Reads consecutive float arrays from a file whose size is known, never past its end.
class Reader {
 public:
  Reader(FILE* f, std::string path, int64_t size) : f_(f), path_(std::move(path)), size_(size) {}

  absl::Status Read(std::vector<float>& out, int64_t count, const char* what) {
    const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
    if (offset_ + bytes > size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": truncated checkpoint: ", what, " needs bytes [", offset_, ", ",
                       offset_ + bytes, ") but the file has ", size_));
    }
    out.resize(count);
    if (count > 0 &&
        std::fread(out.data(), sizeof(float), count, f_) != static_cast<size_t>(count)) {
      return absl::DataLossError(absl::StrCat(path_, ": read error in ", what));
    }
    offset_ += bytes;
    return absl::OkStatus();
  }
  absl::Status Skip(int64_t floats, const char* what) {
    std::vector<float> scratch;
    return Read(scratch, floats, what);
  }
  int64_t offset() const { return offset_; }

 private:
  FILE* f_;  // Not owned.
  std::string path_;
  int64_t size_;
  int64_t offset_ = kHeaderInts * sizeof(int32_t);
};

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

}  // namespace

absl::StatusOr<ModelConfig> LoadLlama2cConfig(const std::string& path) {
  File file;
  int64_t size;
  return ReadHeader(path, file, &size);
}

absl::StatusOr<ModelWeights> LoadLlama2cCheckpoint(const std::string& path) {
  File file;
  int64_t size;
  ASSIGN_OR_RETURN(const ModelConfig c, ReadHeader(path, file, &size));
  const int64_t dim = c.dim, hidden = c.hidden_dim, layers = c.num_layers, kv_dim = c.kv_dim();
  const int64_t vocab = c.vocab_size;
  ModelWeights w;
  w.config = c;
  Reader r(file.get(), path, size);
  RETURN_IF_ERROR(r.Read(w.token_embedding, vocab * dim, "token_embedding"));
  w.layers.resize(layers);
  // The file stores each tensor for all layers before the next tensor.
  struct Field {
    std::vector<float> LayerWeights::*member;
    int64_t count;
    const char* name;
  };
  const Field fields[] = {
      {&LayerWeights::attn_norm, dim, "rms_att_weight"},
      {&LayerWeights::wq, dim * dim, "wq"},
      {&LayerWeights::wk, kv_dim * dim, "wk"},
      {&LayerWeights::wv, kv_dim * dim, "wv"},
      {&LayerWeights::wo, dim * dim, "wo"},
      {&LayerWeights::ffn_norm, dim, "rms_ffn_weight"},
      {&LayerWeights::w_gate, hidden * dim, "w1"},
      {&LayerWeights::w_down, dim * hidden, "w2"},
      {&LayerWeights::w_up, hidden * dim, "w3"},
  };
  for (const Field& f : fields) {
    for (LayerWeights& l : w.layers) RETURN_IF_ERROR(r.Read(l.*f.member, f.count, f.name));
  }
  RETURN_IF_ERROR(r.Read(w.final_norm, dim, "rms_final_weight"));
  RETURN_IF_ERROR(r.Skip(static_cast<int64_t>(c.max_seq_len) * c.head_dim, "freq_cis"));
  if (!c.tied_embeddings) RETURN_IF_ERROR(r.Read(w.classifier, vocab * dim, "wcls"));
  return w;
}

absl::Status WriteLlama2cCheckpoint(const ModelWeights& w, const std::string& path) {
  const ModelConfig& c = w.config;
  if (c.qkv_bias || c.qk_norm || c.rope_scaling_factor > 0 ||
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
