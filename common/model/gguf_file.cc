#include "common/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 40;
constexpr int kMaxDims = 4;

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
  return in.read(reinterpret_cast<char*>(&magic), 4) && magic == kGgufMagic;
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
  if (magic != kGgufMagic) return bad("not a GGUF file (bad magic)");
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
    const GgmlTypeInfo* traits = FindGgmlType(type);
    if (traits == nullptr) {
      return bad(what, ": ggml type ", type,
                 " is not supported (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K)");
    }
    t.type = traits->type;
    if (t.dims[0] % traits->block_values != 0) {
      return bad(what, ": row of ", t.dims[0], " values is not whole ", traits->name, " blocks of ",
                 traits->block_values);
    }
    t.bytes = numel / traits->block_values * traits->block_bytes;
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

absl::StatusOr<TensorView> GgufFile::View(absl::string_view name,
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
  const int64_t cols = t.dims.empty() ? 1 : t.dims[0];
  const int64_t rows = cols > 0 ? static_cast<int64_t>(t.bytes / GgmlRowBytes(t.type, cols)) : 0;
  return TensorView{.type = t.type, .rows = rows, .cols = cols, .data = data_ + t.offset};
}

absl::StatusOr<std::vector<float>> GgufFile::Read(absl::string_view name,
                                                  std::span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(const TensorView view, View(name, shape));
  std::vector<float> out(static_cast<size_t>(view.rows * view.cols));
  DequantizeRows(view, 0, view.rows, out.data());
  return out;
}

}  // namespace pagoda
