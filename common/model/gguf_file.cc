#include "common/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/safetensors.h"

namespace pagoda {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxElements = uint64_t{1} << 40;
constexpr int kMaxDims = 4;

struct TypeTraits {
  GgmlType type;
  const char* name;
  int block;  // values per block
  int bytes;  // bytes per block
};
constexpr TypeTraits kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ4_K, "Q4_K", 256, 144},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},
};

const TypeTraits* Traits(uint32_t type) {
  for (const TypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == type) return &t;
  }
  return nullptr;
}

// Bytes of one scalar metadata value; 0 for strings and arrays.
size_t ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float F16(const uint8_t* p) { return HalfToFloat(Load<uint16_t>(p)); }

// llama.cpp's get_scale_min_k4: the 6-bit scale and min of sub-block j of a Q4_K block.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One block of `type` at `b` into `y` (block values), as llama.cpp's dequantize_row_*.
void DequantizeBlock(GgmlType type, const uint8_t* b, float* y) {
  switch (type) {
    case GgmlType::kF32:
      *y = Load<float>(b);
      return;
    case GgmlType::kF16:
      *y = F16(b);
      return;
    case GgmlType::kBF16:
      *y = Bf16ToFloat(Load<uint16_t>(b));
      return;
    case GgmlType::kQ4_0: {  // f16 d | 16 bytes: low nibbles values 0..15, high 16..31
      const float d = F16(b);
      for (int j = 0; j < 16; ++j) {
        y[j] = ((b[2 + j] & 0xF) - 8) * d;
        y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
      }
      return;
    }
    case GgmlType::kQ8_0: {  // f16 d | int8 qs[32]
      const float d = F16(b);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
      return;
    }
    case GgmlType::kQ4_K: {  // f16 d | f16 dmin | scales[12] | qs[128]
      const float d = F16(b), min = F16(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* q = b + 16;
      for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        uint8_t sc, m;
        ScaleMinK4(is, scales, &sc, &m);
        const float d1 = d * sc, m1 = min * m;
        ScaleMinK4(is + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = min * m;
        for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      }
      return;
    }
    case GgmlType::kQ6_K: {  // ql[128] | qh[64] | int8 scales[16] | f16 d
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = F16(b + 208);
      for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * sc[is] * q1;
          y[l + 32] = d * sc[is + 2] * q2;
          y[l + 64] = d * sc[is + 4] * q3;
          y[l + 96] = d * sc[is + 6] * q4;
        }
      }
      return;
    }
  }
}

// A bounds-checked cursor over the mapped file.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t size) : p_(p), size_(size) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  bool Skip(uint64_t n) {
    if (n > left()) return false;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Read(T* v) {
    if (sizeof(T) > left()) return false;
    *v = Load<T>(p_ + pos_);
    pos_ += sizeof(T);
    return true;
  }
  bool String(absl::string_view* s) {
    uint64_t n;
    if (!Read(&n) || n > left()) return false;
    *s = absl::string_view(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return true;
  }
  const uint8_t* here() const { return p_ + pos_; }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

bool IsGgufFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), 4) && magic == kMagic;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 24) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes is too short for a GGUF header"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": cannot map"));
  std::unique_ptr<GgufFile> file(new GgufFile(path, static_cast<const uint8_t*>(map), size));
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() { munmap(const_cast<uint8_t*>(map_), size_); }

absl::Status GgufFile::Parse() {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", parts...));
  };
  Cursor c(map_, size_);
  uint32_t magic = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  c.Read(&magic);
  if (magic != kMagic) return bad("not a GGUF file (bad magic)");
  c.Read(&version_);
  if (version_ != 2 && version_ != 3) {
    return bad("GGUF version ", version_, " is not supported (2, 3)");
  }
  c.Read(&tensor_count);
  c.Read(&kv_count);
  // Each entry takes at least 12 (kv) or 24 (tensor) bytes: counts beyond that are lies.
  if (kv_count > c.left() / 12) return bad("kv_count ", kv_count, " does not fit the file");
  if (tensor_count > c.left() / 24) {
    return bad("tensor_count ", tensor_count, " does not fit the file");
  }
  for (uint64_t i = 0; i < kv_count; ++i) {
    absl::string_view key;
    if (!c.String(&key)) return bad("metadata entry ", i, ": truncated key");
    const std::string what = absl::StrCat("metadata ", key);
    GgufValue v;
    uint32_t type;
    if (!c.Read(&type)) return bad(what, ": truncated type");
    v.type = static_cast<GgufType>(type);
    if (type > static_cast<uint32_t>(GgufType::kF64)) return bad(what, ": unknown type ", type);
    if (v.type == GgufType::kArray) {
      uint32_t element;
      if (!c.Read(&element) || !c.Read(&v.count)) return bad(what, ": truncated array header");
      v.element_type = static_cast<GgufType>(element);
      if (element > static_cast<uint32_t>(GgufType::kF64) || v.element_type == GgufType::kArray) {
        return bad(what, ": array element type ", element, " is not supported");
      }
      if (v.element_type == GgufType::kString) {
        if (v.count > c.left() / 8) return bad(what, ": ", v.count, " strings do not fit the file");
        v.strings.reserve(v.count);
        for (uint64_t k = 0; k < v.count; ++k) {
          absl::string_view s;
          if (!c.String(&s)) return bad(what, ": string ", k, " runs past the end of the file");
          v.strings.push_back(s);
        }
      } else {
        const size_t each = ScalarBytes(v.element_type);
        if (v.count > c.left() / each) {
          return bad(what, ": ", v.count, " elements do not fit the file");
        }
        v.data = c.here();
        c.Skip(v.count * each);
      }
    } else if (v.type == GgufType::kString) {
      absl::string_view s;
      if (!c.String(&s)) return bad(what, ": string runs past the end of the file");
      v.strings.push_back(s);
    } else {
      v.data = c.here();
      if (!c.Skip(ScalarBytes(v.type))) return bad(what, ": truncated value");
    }
    if (!metadata_.emplace(std::string(key), std::move(v)).second) {
      return bad(what, ": duplicate key");
    }
  }
  absl::StatusOr<int64_t> alignment = IntOr("general.alignment", 32);
  if (!alignment.ok()) return alignment.status();
  if (*alignment <= 0 || *alignment > (1 << 20) || (*alignment & (*alignment - 1)) != 0) {
    return bad("general.alignment ", *alignment, " is not a power of two");
  }
  for (uint64_t i = 0; i < tensor_count; ++i) {
    absl::string_view name;
    if (!c.String(&name)) return bad("tensor ", i, ": truncated name");
    const std::string what = absl::StrCat("tensor ", name);
    GgufTensor t;
    uint32_t n_dims, type;
    if (!c.Read(&n_dims)) return bad(what, ": truncated n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) return bad(what, ": n_dims ", n_dims, " (1 to 4)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n;
      if (!c.Read(&n)) return bad(what, ": truncated dims");
      if (n == 0 || n > kMaxElements || numel > kMaxElements / n) {
        return bad(what, ": dimension ", d, " = ", n, " is out of range");
      }
      numel *= n;
      t.dims.push_back(static_cast<int64_t>(n));
    }
    if (!c.Read(&type) || !c.Read(&t.offset)) return bad(what, ": truncated type or offset");
    const TypeTraits* traits = Traits(type);
    if (traits == nullptr) {
      return bad(what, ": ggml type ", type,
                 " is not supported (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K)");
    }
    t.type = traits->type;
    if (t.dims[0] % traits->block != 0) {
      return bad(what, ": row of ", t.dims[0], " values is not whole ", traits->name, " blocks of ",
                 traits->block);
    }
    t.bytes = numel / traits->block * traits->bytes;
    if (t.offset % *alignment != 0) return bad(what, ": offset ", t.offset, " is not aligned");
    if (!tensors_.emplace(std::string(name), std::move(t)).second) {
      return bad(what, ": duplicate tensor name");
    }
  }
  const size_t data_start = (c.pos() + *alignment - 1) / *alignment * *alignment;
  if (tensors_.empty()) {
    data_ = map_ + std::min(data_start, size_);
    return absl::OkStatus();
  }
  if (data_start > size_) return bad("the tensor data section starts past the end of the file");
  data_ = map_ + data_start;
  const uint64_t data_size = size_ - data_start;
  std::vector<std::pair<uint64_t, const std::string*>> starts;
  for (const auto& [name, t] : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return bad("tensor ", name, ": [", t.offset, ", ", t.offset + t.bytes,
                 ") is outside the data section of ", data_size, " bytes");
    }
    starts.push_back({t.offset, &name});
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const GgufTensor& prev = tensors_.find(*starts[i - 1].second)->second;
    if (starts[i].first < prev.offset + prev.bytes) {
      return bad("tensors ", *starts[i - 1].second, " and ", *starts[i].second, " overlap");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const GgufValue*> GgufFile::Find(absl::string_view key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return absl::NotFoundError(absl::StrCat(path_, ": no ", key));
  return &it->second;
}

absl::StatusOr<int64_t> GgufFile::Int(absl::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Find(key);
  if (!v.ok()) return v.status();
  const uint8_t* p = (*v)->data;
  switch ((*v)->type) {
    case GgufType::kU8:
      return Load<uint8_t>(p);
    case GgufType::kI8:
      return Load<int8_t>(p);
    case GgufType::kU16:
      return Load<uint16_t>(p);
    case GgufType::kI16:
      return Load<int16_t>(p);
    case GgufType::kU32:
      return Load<uint32_t>(p);
    case GgufType::kI32:
      return Load<int32_t>(p);
    case GgufType::kI64:
      return Load<int64_t>(p);
    case GgufType::kU64: {
      const uint64_t u = Load<uint64_t>(p);
      if (u > static_cast<uint64_t>(INT64_MAX)) break;
      return static_cast<int64_t>(u);
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not an integer"));
}

absl::StatusOr<int64_t> GgufFile::IntOr(absl::string_view key, int64_t fallback) const {
  return metadata_.contains(key) ? Int(key) : fallback;
}

absl::StatusOr<double> GgufFile::FloatOr(absl::string_view key, double fallback) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return fallback;
  if (it->second.type == GgufType::kF32) return Load<float>(it->second.data);
  if (it->second.type == GgufType::kF64) return Load<double>(it->second.data);
  return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not a float"));
}

absl::StatusOr<bool> GgufFile::BoolOr(absl::string_view key, bool fallback) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return fallback;
  if (it->second.type != GgufType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not a bool"));
  }
  return *it->second.data != 0;
}

absl::StatusOr<std::string> GgufFile::StringOr(absl::string_view key, std::string fallback) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return fallback;
  if (it->second.type != GgufType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not a string"));
  }
  return std::string(it->second.strings[0]);
}

absl::StatusOr<std::vector<absl::string_view>> GgufFile::StringArray(absl::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Find(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray || (*v)->element_type != GgufType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not a string array"));
  }
  return (*v)->strings;
}

absl::StatusOr<std::vector<float>> GgufFile::FloatArray(absl::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Find(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray || (*v)->element_type != GgufType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not an f32 array"));
  }
  std::vector<float> out((*v)->count);
  std::memcpy(out.data(), (*v)->data, out.size() * 4);
  return out;
}

absl::StatusOr<std::vector<int32_t>> GgufFile::Int32Array(absl::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Find(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray || (*v)->element_type != GgufType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", key, " is not an i32 array"));
  }
  std::vector<int32_t> out((*v)->count);
  std::memcpy(out.data(), (*v)->data, out.size() * 4);
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::Read(absl::string_view name,
                                                  std::span<const int64_t> shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor ", name));
  }
  const GgufTensor& t = it->second;
  if (!std::equal(shape.begin(), shape.end(), t.dims.rbegin(), t.dims.rend())) {
    std::vector<int64_t> row_major(t.dims.rbegin(), t.dims.rend());
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor ", name, " has shape [",
                                                   absl::StrJoin(row_major, ", "), "], expected [",
                                                   absl::StrJoin(shape, ", "), "]"));
  }
  const TypeTraits* traits = Traits(static_cast<uint32_t>(t.type));
  const uint64_t blocks = t.bytes / traits->bytes;
  std::vector<float> out(blocks * traits->block);
  const uint8_t* p = data_ + t.offset;
  for (uint64_t b = 0; b < blocks; ++b) {
    DequantizeBlock(t.type, p + b * traits->bytes, &out[b * traits->block]);
  }
  return out;
}

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

// --- Writer -------------------------------------------------------------------------------

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
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kString));
  Put<uint64_t>(&out, v.size());
  for (const std::string& s : v) PutString(&out, s);
  kvs_.push_back({key, out});
}
void GgufWriter::AddF32Array(const std::string& key, const std::vector<float>& v) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kF32));
  Put<uint64_t>(&out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  kvs_.push_back({key, out});
}
void GgufWriter::AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kArray));
  Put<uint32_t>(&out, static_cast<uint32_t>(GgufType::kI32));
  Put<uint64_t>(&out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  kvs_.push_back({key, out});
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
  Put<uint32_t>(&out, kMagic);
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

}  // namespace pagoda
