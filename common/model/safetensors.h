// The safetensors format: an 8-byte little-endian header length, a JSON header mapping each
// tensor name to {dtype, shape, data_offsets}, then the data. Read with mmap; F32, F16 and BF16
// are converted to float32 on read. Everything in the header is checked against the file
// (offsets inside the data, no overlaps, sizes matching dtype x shape) before any read.
#ifndef PAGODA_COMMON_MODEL_SAFETENSORS_H_
#define PAGODA_COMMON_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/tensor_view.h"

namespace pagoda {

enum class TensorDtype { kF32, kF16, kBF16 };

struct TensorInfo {
  TensorDtype dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

  // The tensor as the file stores it (F32, F16, BF16 as the ggml types of the same names),
  // its last dimension as the row; INVALID_ARGUMENT naming it when its shape is not `shape`.
  absl::StatusOr<TensorView> View(const std::string& name, std::span<const int64_t> shape) const;
  // The tensor as float32; errors as View's.
  absl::StatusOr<std::vector<float>> Read(const std::string& name,
                                          std::span<const int64_t> shape) const;

 private:
  SafetensorsFile(std::string path, const uint8_t* map, size_t size)
      : path_(std::move(path)), map_(map), size_(size) {}

  const std::string path_;
  const uint8_t* const map_;
  const size_t size_;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> tensors_;
};

// A model's tensors over one file or the shards named by model.safetensors.index.json.
class SafetensorsModel {
 public:
  // `dir` holds model.safetensors, or model.safetensors.index.json and its shards.
  static absl::StatusOr<SafetensorsModel> Open(const std::string& dir);

  bool Has(const std::string& name) const { return where_.contains(name); }
  // The tensor's dtype in its file; REQUIRES: Has(name).
  TensorDtype dtype(const std::string& name) const {
    return where_.at(name)->tensors().at(name).dtype;
  }
  // NOT_FOUND naming the tensor when no file has it.
  absl::StatusOr<TensorView> View(const std::string& name, std::span<const int64_t> shape) const;
  absl::StatusOr<std::vector<float>> Read(const std::string& name,
                                          std::span<const int64_t> shape) const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

// Writes `tensors` (float32 values, converted to `dtype`) as one safetensors file.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const std::vector<float>* values;
};
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              TensorDtype dtype);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_SAFETENSORS_H_
