#include "common/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/numeric.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

constexpr size_t kMaxHeaderBytes = 100 << 20;

size_t DtypeBytes(TensorDtype d) { return d == TensorDtype::kF32 ? 4 : 2; }

const char* DtypeName(TensorDtype d) {
  switch (d) {
    case TensorDtype::kF32:
      return "F32";
    case TensorDtype::kF16:
      return "F16";
    case TensorDtype::kBF16:
      return "BF16";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  struct stat st;
  fstat(fd, &st);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": too short for a safetensors file"));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": cannot map"));
  std::unique_ptr<SafetensorsFile> file(
      new SafetensorsFile(path, static_cast<const uint8_t*>(map), size));
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file->map_[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    return bad("header length ", header_len, " does not fit the file of ", size, " bytes");
  }
  absl::StatusOr<Json> header =
      ParseJson(absl::string_view(reinterpret_cast<const char*>(file->map_ + 8), header_len), path);
  if (!header.ok()) return header.status();
  if (!header->is_object()) return bad("the header is not a JSON object");
  file->data_ = file->map_ + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  for (const auto& [name, t] : header->items()) {
    if (name == "__metadata__") continue;
    const std::string what = absl::StrCat(path, ": tensor ", name);
    TensorInfo info;
    absl::StatusOr<std::string> dtype = JsonString(t, "dtype", what);
    if (!dtype.ok()) return dtype.status();
    if (*dtype == "F32") {
      info.dtype = TensorDtype::kF32;
    } else if (*dtype == "F16") {
      info.dtype = TensorDtype::kF16;
    } else if (*dtype == "BF16") {
      info.dtype = TensorDtype::kBF16;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dtype ", *dtype, " is not supported (F32, F16, BF16)"));
    }
    const Json* shape = JsonMember(t, "shape");
    const Json* offsets = JsonMember(t, "data_offsets");
    if (shape == nullptr || !shape->is_array() || offsets == nullptr || !offsets->is_array() ||
        offsets->size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": needs a shape list and two data_offsets"));
    }
    uint64_t numel = 1;
    for (const Json& d : *shape) {
      absl::StatusOr<int64_t> n = JsonAsInt(d, absl::StrCat(what, ": shape"));
      if (!n.ok()) return n.status();
      if (*n < 0 || (*n > 0 && numel > (uint64_t{1} << 40) / *n)) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": bad shape dimension ", *n));
      }
      info.shape.push_back(*n);
      numel *= *n;
    }
    absl::StatusOr<int64_t> begin = JsonAsInt((*offsets)[0], absl::StrCat(what, ": data_offsets"));
    absl::StatusOr<int64_t> end = JsonAsInt((*offsets)[1], absl::StrCat(what, ": data_offsets"));
    if (!begin.ok()) return begin.status();
    if (!end.ok()) return end.status();
    if (*begin < 0 || *end < *begin || static_cast<uint64_t>(*end) > data_size) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": data_offsets [", *begin, ", ", *end,
                                                     ") outside the data of ", data_size,
                                                     " bytes"));
    }
    if (static_cast<uint64_t>(*end - *begin) != numel * DtypeBytes(info.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", *end - *begin, " bytes for ", numel, " ", *dtype, " values"));
    }
    info.begin = static_cast<size_t>(*begin);
    info.end = static_cast<size_t>(*end);
    file->tensors_[name] = std::move(info);
  }
  // No two tensors may share bytes.
  std::vector<std::pair<size_t, const std::string*>> starts;
  for (const auto& [name, info] : file->tensors_) {
    if (info.end > info.begin) starts.push_back({info.begin, &name});
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const TensorInfo& prev = file->tensors_.at(*starts[i - 1].second);
    if (starts[i].first < prev.end) {
      return bad("tensors ", *starts[i - 1].second, " and ", *starts[i].second, " overlap");
    }
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() { munmap(const_cast<uint8_t*>(map_), size_); }

absl::StatusOr<TensorView> SafetensorsFile::View(const std::string& name,
                                                 std::span<const int64_t> shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor ", name));
  }
  const TensorInfo& info = it->second;
  if (!std::equal(shape.begin(), shape.end(), info.shape.begin(), info.shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor ", name, " has shape [",
                                                   absl::StrJoin(info.shape, ", "), "], expected [",
                                                   absl::StrJoin(shape, ", "), "]"));
  }
  const int64_t values = static_cast<int64_t>((info.end - info.begin) / DtypeBytes(info.dtype));
  const int64_t cols = info.shape.empty() ? 1 : info.shape.back();
  const GgmlType type = info.dtype == TensorDtype::kF32   ? GgmlType::kF32
                        : info.dtype == TensorDtype::kF16 ? GgmlType::kF16
                                                          : GgmlType::kBF16;
  return TensorView{
      .type = type, .rows = cols > 0 ? values / cols : 0, .cols = cols, .data = data_ + info.begin};
}

absl::StatusOr<std::vector<float>> SafetensorsFile::Read(const std::string& name,
                                                         std::span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(const TensorView view, View(name, shape));
  std::vector<float> out(static_cast<size_t>(view.rows * view.cols));
  DequantizeRows(view, 0, view.rows, out.data());
  return out;
}

absl::StatusOr<SafetensorsModel> SafetensorsModel::Open(const std::string& dir) {
  SafetensorsModel model;
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::vector<std::string> names;
  if (std::filesystem::exists(index_path)) {
    absl::StatusOr<std::string> text = ReadTextFile(index_path);
    if (!text.ok()) return text.status();
    absl::StatusOr<Json> index = ParseJson(*text, index_path);
    if (!index.ok()) return index.status();
    const Json* map = JsonMember(*index, "weight_map");
    if (map == nullptr || !map->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": no weight_map object"));
    }
    for (const auto& [tensor, file] : map->items()) {
      if (!file.is_string() || file.get_ref<const std::string&>().find('/') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": weight_map of ", tensor, " must name a file here"));
      }
      const std::string& name = file.get_ref<const std::string&>();
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  } else {
    names.push_back("model.safetensors");
  }
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(dir + "/" + name);
    if (!file.ok()) return file.status();
    model.files_.push_back(std::move(*file));
    for (const auto& [tensor, info] : model.files_.back()->tensors()) {
      if (!model.where_.emplace(tensor, model.files_.back().get()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, ": tensor ", tensor, " is in more than one shard"));
      }
    }
  }
  return model;
}

absl::StatusOr<TensorView> SafetensorsModel::View(const std::string& name,
                                                  std::span<const int64_t> shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  return it->second->View(name, shape);
}

absl::StatusOr<std::vector<float>> SafetensorsModel::Read(const std::string& name,
                                                          std::span<const int64_t> shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  return it->second->Read(name, shape);
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              TensorDtype dtype) {
  OrderedJson entries = OrderedJson::object();
  size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const size_t bytes = t.values->size() * DtypeBytes(dtype);
    entries[t.name] = {{"dtype", DtypeName(dtype)},
                       {"shape", t.shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header = JsonDump(entries);
  while (header.size() % 8 != 0) header += ' ';  // keeps the data 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out << header;
  for (const TensorToWrite& t : tensors) {
    if (dtype == TensorDtype::kF32) {
      out.write(reinterpret_cast<const char*>(t.values->data()), t.values->size() * 4);
      continue;
    }
    std::vector<uint16_t> half(t.values->size());
    for (size_t i = 0; i < half.size(); ++i) {
      half[i] =
          dtype == TensorDtype::kF16 ? FloatToHalf((*t.values)[i]) : FloatToBf16((*t.values)[i]);
    }
    out.write(reinterpret_cast<const char*>(half.data()), half.size() * 2);
  }
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat(path, ": write failed"));
}

}  // namespace pagoda
