#include "tests/common/model/gguf_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/random_weights.h"
#include "common/numeric.h"
#include "glog/logging.h"
#include "tests/test_util.h"

namespace pagoda::testing {

std::vector<uint8_t> QuantizeQ8_0(std::span<const float> values) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < values.size(); b += 32) {
    float amax = 0;
    for (size_t j = b; j < b + 32 && j < values.size(); ++j) {
      amax = std::max(amax, std::fabs(values[j]));
    }
    const float d = amax / 127;
    const float id = d != 0 ? 1 / d : 0;
    const uint16_t h = FloatToHalf(d);
    out.push_back(static_cast<uint8_t>(h));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (size_t j = b; j < b + 32; ++j) {
      const float x = j < values.size() ? values[j] : 0.0f;
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(x * id))));
    }
  }
  return out;
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                           std::vector<uint8_t> data) {
  stream_.AddTensorInfo(name, std::move(shape), type);
  data_.push_back(std::move(data));
}

void GgufWriter::AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                              const std::vector<float>& values) {
  std::vector<uint8_t> data(values.size() * 4);
  std::memcpy(data.data(), values.data(), data.size());
  AddTensor(name, std::move(shape), GgmlType::kF32, std::move(data));
}

absl::Status GgufWriter::Write(const std::string& path) {
  if (absl::Status s = stream_.Open(path); !s.ok()) return s;
  for (const std::vector<uint8_t>& data : data_) {
    if (absl::Status s = stream_.Append(data); !s.ok()) return s;
  }
  return stream_.Close();
}

std::vector<uint8_t> EncodeGgml(const std::vector<float>& v, GgmlType type) {
  std::vector<uint8_t> out;
  if (type == GgmlType::kQ8_0) return QuantizeQ8_0(v);
  if (type == GgmlType::kF32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  for (float x : v) {
    const uint16_t h = type == GgmlType::kF16 ? FloatToHalf(x) : FloatToBf16(x);
    out.push_back(static_cast<uint8_t>(h));
    out.push_back(static_cast<uint8_t>(h >> 8));
  }
  return out;
}

void WriteGgufModel(const ModelWeights& w, const std::string& arch, GgmlType type,
                    const std::string& path) {
  const ModelConfig& c = w.config;
  GgufWriter g;
  g.AddString("general.architecture", arch);
  g.AddString("general.name", "random-" + arch);
  g.AddHyperparameters(c, arch);
  g.AddU32("tokenizer.ggml.bos_token_id", 1);
  g.AddU32("tokenizer.ggml.eos_token_id", 2);
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& v) {
    g.AddTensor(name, std::move(shape), type, EncodeGgml(v, type));
  };
  auto vec = [&](const std::string& name, const std::vector<float>& v) {
    g.AddF32Tensor(name, {static_cast<int64_t>(v.size())}, v);
  };
  if (c.rope_scaling.type == RopeScalingType::kLlama3) {
    // Llama 3.1's scaling as llama.cpp's converter stores it: a factor per frequency.
    ModelConfig plain = c;
    plain.rope_scaling = {};
    std::vector<float> factors;
    for (int i = 0; i < c.head_dim / 2; ++i) {
      factors.push_back(plain.RopeFrequency(i) / c.RopeFrequency(i));
    }
    vec("rope_freqs.weight", factors);
  }
  matrix("token_embd.weight", {c.vocab_size, c.dim}, w.token_embedding);
  vec("output_norm.weight", w.final_norm);
  if (!c.tied_embeddings) matrix("output.weight", {c.vocab_size, c.dim}, w.classifier);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    vec(p + "attn_norm.weight", L.attn_norm);
    matrix(p + "attn_q.weight", {c.q_dim(), c.dim}, L.wq);
    matrix(p + "attn_k.weight", {c.kv_dim(), c.dim}, L.wk);
    matrix(p + "attn_v.weight", {c.kv_dim(), c.dim}, L.wv);
    matrix(p + "attn_output.weight", {c.dim, c.q_dim()}, L.wo);
    if (!L.bq.empty()) {
      vec(p + "attn_q.bias", L.bq);
      vec(p + "attn_k.bias", L.bk);
      vec(p + "attn_v.bias", L.bv);
    }
    if (!L.q_norm.empty()) {
      vec(p + "attn_q_norm.weight", L.q_norm);
      vec(p + "attn_k_norm.weight", L.k_norm);
    }
    vec(p + "ffn_norm.weight", L.ffn_norm);
    matrix(p + "ffn_gate.weight", {c.hidden_dim, c.dim}, L.w_gate);
    matrix(p + "ffn_up.weight", {c.hidden_dim, c.dim}, L.w_up);
    matrix(p + "ffn_down.weight", {c.dim, c.hidden_dim}, L.w_down);
  }
  CHECK(g.Write(path).ok());
}

std::string TinyGgufModelBytes() {
  ModelConfig c;
  CHECK(NamedModelConfig("stories260K", &c));
  c.num_layers = 1;
  c.vocab_size = 64;
  c.hidden_dim = 64;
  ModelWeights w = RandomModelWeights(c, 1);
  const std::string path = TempDir() + "/tiny.gguf";
  WriteGgufModel(w, "llama", GgmlType::kF32, path);
  return ReadFile(path);
}

BadGguf MutatedGguf(const std::string& good, const std::string& name,
                    const std::function<void(std::string&)>& edit, const std::string& message) {
  std::string bytes = good;
  edit(bytes);
  return {name, std::move(bytes), message};
}

size_t GgufTensorInfoAt(const std::string& bytes, const std::string& name) {
  std::string encoded(8, '\0');  // as the file spells the name: length, then bytes
  PutAt<uint64_t>(&encoded, 0, name.size());
  encoded += name;
  const size_t at = bytes.find(encoded);
  CHECK_NE(at, std::string::npos) << name;
  return at + 8 + name.size();
}

}  // namespace pagoda::testing
