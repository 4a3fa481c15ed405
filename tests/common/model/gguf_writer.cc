#include "tests/common/model/gguf_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

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

namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

std::string Typed(GgufType type, const void* v, size_t bytes) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(type));
  out.append(static_cast<const char*>(v), bytes);
  return out;
}

// An array's type and header: kArray, the element type, the count.
std::string ArrayHeader(GgufType element, size_t count) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(&out, static_cast<uint32_t>(element));
  Put<uint64_t>(&out, count);
  return out;
}

}  // namespace

void GgufWriter::AddU32(const std::string& key, uint32_t v) {
  kvs_.push_back({key, Typed(GgufType::kU32, &v, 4)});
}
void GgufWriter::AddI32(const std::string& key, int32_t v) {
  kvs_.push_back({key, Typed(GgufType::kI32, &v, 4)});
}
void GgufWriter::AddF32(const std::string& key, float v) {
  kvs_.push_back({key, Typed(GgufType::kF32, &v, 4)});
}
void GgufWriter::AddBool(const std::string& key, bool v) {
  const uint8_t b = v;
  kvs_.push_back({key, Typed(GgufType::kBool, &b, 1)});
}
void GgufWriter::AddString(const std::string& key, const std::string& v) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kString));
  PutString(&out, v);
  kvs_.push_back({key, out});
}
void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::string out = ArrayHeader(GgufType::kString, v.size());
  for (const std::string& s : v) PutString(&out, s);
  kvs_.push_back({key, out});
}
void GgufWriter::AddF32Array(const std::string& key, const std::vector<float>& v) {
  kvs_.push_back({key, ArrayHeader(GgufType::kF32, v.size()) +
                           std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
}
void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  kvs_.push_back({key, ArrayHeader(GgufType::kI32, v.size()) +
                           std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
}

void GgufWriter::AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                           std::vector<uint8_t> data) {
  tensors_.push_back({name, std::move(shape), type, std::move(data)});
}

void GgufWriter::AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                              const std::vector<float>& values) {
  std::vector<uint8_t> data(values.size() * 4);
  std::memcpy(data.data(), values.data(), data.size());
  AddTensor(name, std::move(shape), GgmlType::kF32, std::move(data));
}

absl::Status GgufWriter::Write(const std::string& path) const {
  constexpr size_t kAlign = 32;
  std::string out;
  Put<uint32_t>(&out, kGgufMagic);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    PutString(&out, key);
    out += value;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) Put<uint64_t>(&out, *d);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offset += (t.data.size() + kAlign - 1) / kAlign * kAlign;
  }
  out.resize((out.size() + kAlign - 1) / kAlign * kAlign, '\0');
  for (const Tensor& t : tensors_) {
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    out.resize((out.size() + kAlign - 1) / kAlign * kAlign, '\0');
  }
  std::ofstream file(path, std::ios::binary);
  file << out;
  return file ? absl::OkStatus() : absl::InternalError(absl::StrCat(path, ": cannot write"));
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
  const RopeScaling& rs = c.rope_scaling;
  const bool stretched = rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kYarn;
  // As llama.cpp's converter writes YaRN and linear scaling: the unscaled context, the type,
  // the factor and the original context (the attention factor left to its default).
  g.AddU32(arch + ".context_length", stretched ? rs.original_max_position : c.max_seq_len);
  if (stretched) {
    g.AddString(arch + ".rope.scaling.type", rs.type == RopeScalingType::kYarn ? "yarn" : "linear");
    g.AddF32(arch + ".rope.scaling.factor", static_cast<float>(rs.factor));
    g.AddU32(arch + ".rope.scaling.original_context_length", rs.original_max_position);
  }
  g.AddU32(arch + ".embedding_length", c.dim);
  g.AddU32(arch + ".feed_forward_length", c.hidden_dim);
  g.AddU32(arch + ".block_count", c.num_layers);
  g.AddU32(arch + ".attention.head_count", c.num_heads);
  g.AddU32(arch + ".attention.head_count_kv", c.num_kv_heads);
  g.AddU32(arch + ".attention.key_length", c.head_dim);
  g.AddU32(arch + ".attention.value_length", c.head_dim);
  g.AddF32(arch + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  g.AddF32(arch + ".rope.freq_base", c.rope_theta);
  g.AddU32("tokenizer.ggml.bos_token_id", 1);
  g.AddU32("tokenizer.ggml.eos_token_id", 2);
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& v) {
    g.AddTensor(name, std::move(shape), type, EncodeGgml(v, type));
  };
  auto vec = [&](const std::string& name, const std::vector<float>& v) {
    g.AddF32Tensor(name, {static_cast<int64_t>(v.size())}, v);
  };
  if (rs.type == RopeScalingType::kLlama3) {
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
  std::string encoded;  // as the file spells the name: length, then bytes
  PutString(&encoded, name);
  const size_t at = bytes.find(encoded);
  CHECK_NE(at, std::string::npos) << name;
  return at + 8 + name.size();
}

}  // namespace pagoda::testing
