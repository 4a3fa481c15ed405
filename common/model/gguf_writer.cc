#include "common/model/gguf_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/gguf_file.h"

namespace pagoda {
namespace {

constexpr uint64_t kAlign = 32;  // general.alignment's default

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

uint64_t Aligned(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

GgufStreamWriter::~GgufStreamWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void GgufStreamWriter::AddU32(const std::string& key, uint32_t v) {
  kvs_.push_back({key, Typed(GgufType::kU32, &v, 4)});
}
void GgufStreamWriter::AddI32(const std::string& key, int32_t v) {
  kvs_.push_back({key, Typed(GgufType::kI32, &v, 4)});
}
void GgufStreamWriter::AddF32(const std::string& key, float v) {
  kvs_.push_back({key, Typed(GgufType::kF32, &v, 4)});
}
void GgufStreamWriter::AddBool(const std::string& key, bool v) {
  const uint8_t b = v;
  kvs_.push_back({key, Typed(GgufType::kBool, &b, 1)});
}
void GgufStreamWriter::AddString(const std::string& key, const std::string& v) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kString));
  PutString(&out, v);
  kvs_.push_back({key, out});
}
void GgufStreamWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::string out = ArrayHeader(GgufType::kString, v.size());
  for (const std::string& s : v) PutString(&out, s);
  kvs_.push_back({key, out});
}
void GgufStreamWriter::AddF32Array(const std::string& key, const std::vector<float>& v) {
  kvs_.push_back({key, ArrayHeader(GgufType::kF32, v.size()) +
                           std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
}
void GgufStreamWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  kvs_.push_back({key, ArrayHeader(GgufType::kI32, v.size()) +
                           std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
}

uint64_t GgufStreamWriter::TensorBytes(GgmlType type, int64_t count) {
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
  if (info == nullptr || count < 0 || count % info->block_values != 0) return 0;
  return static_cast<uint64_t>(count / info->block_values) * info->block_bytes;
}

void GgufStreamWriter::AddTensorInfo(const std::string& name, std::vector<int64_t> shape,
                                     GgmlType type) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  tensors_.push_back({name, std::move(shape), type, TensorBytes(type, count)});
}

absl::Status GgufStreamWriter::Write(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
    return absl::InternalError(absl::StrCat(path_, ": cannot write: ", std::strerror(errno)));
  }
  position_ += size;
  return absl::OkStatus();
}

absl::Status GgufStreamWriter::Pad() {
  static constexpr char kZeros[kAlign] = {};
  return Write(kZeros, Aligned(position_) - position_);
}

absl::Status GgufStreamWriter::Open(const std::string& path) {
  if (file_ != nullptr) return absl::FailedPreconditionError("GgufStreamWriter: already open");
  for (const Tensor& t : tensors_) {
    if (t.bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.name, ": not whole blocks of its type, or empty"));
    }
  }
  std::string header;
  Put<uint32_t>(&header, kGgufMagic);
  Put<uint32_t>(&header, 3);
  Put<uint64_t>(&header, tensors_.size());
  Put<uint64_t>(&header, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    PutString(&header, key);
    header += value;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&header, t.name);
    Put<uint32_t>(&header, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) Put<uint64_t>(&header, *d);
    Put<uint32_t>(&header, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&header, offset);
    offset += Aligned(t.bytes);
  }
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  position_ = tensor_ = filled_ = 0;
  if (absl::Status s = Write(header.data(), header.size()); !s.ok()) return s;
  return Pad();
}

absl::Status GgufStreamWriter::Append(std::span<const uint8_t> bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError("GgufStreamWriter: not open");
  while (!bytes.empty()) {
    if (tensor_ == tensors_.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ": ", bytes.size(), " bytes past the last tensor"));
    }
    const uint64_t n = std::min<uint64_t>(bytes.size(), tensors_[tensor_].bytes - filled_);
    if (absl::Status s = Write(bytes.data(), n); !s.ok()) return s;
    bytes = bytes.subspan(n);
    filled_ += n;
    if (filled_ == tensors_[tensor_].bytes) {
      ++tensor_;
      filled_ = 0;
      if (absl::Status s = Pad(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status GgufStreamWriter::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError("GgufStreamWriter: not open");
  const bool complete = tensor_ == tensors_.size();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!complete) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": tensor ", tensors_[tensor_].name,
                                                      " has ", filled_, " of its ",
                                                      tensors_[tensor_].bytes, " bytes"));
  }
  if (!closed) {
    return absl::InternalError(absl::StrCat(path_, ": cannot write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void AddGgufHyperparameters(const ModelConfig& c, const std::string& arch, GgufStreamWriter* g) {
  const RopeScaling& rs = c.rope_scaling;
  const bool stretched = rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kYarn;
  // As llama.cpp's converter writes YaRN and linear scaling: the unscaled context, the type,
  // the factor and the original context (the attention factor left to its default).
  g->AddU32(arch + ".context_length", stretched ? rs.original_max_position : c.max_seq_len);
  if (stretched) {
    g->AddString(arch + ".rope.scaling.type",
                 rs.type == RopeScalingType::kYarn ? "yarn" : "linear");
    g->AddF32(arch + ".rope.scaling.factor", static_cast<float>(rs.factor));
    g->AddU32(arch + ".rope.scaling.original_context_length", rs.original_max_position);
  }
  g->AddU32(arch + ".embedding_length", c.dim);
  g->AddU32(arch + ".feed_forward_length", c.hidden_dim);
  g->AddU32(arch + ".block_count", c.num_layers);
  g->AddU32(arch + ".attention.head_count", c.num_heads);
  g->AddU32(arch + ".attention.head_count_kv", c.num_kv_heads);
  g->AddU32(arch + ".attention.key_length", c.head_dim);
  g->AddU32(arch + ".attention.value_length", c.head_dim);
  g->AddF32(arch + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  g->AddF32(arch + ".rope.freq_base", c.rope_theta);
}

}  // namespace pagoda
