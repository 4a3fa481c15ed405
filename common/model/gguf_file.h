// The GGUF format (llama.cpp's model files), version 2 and 3, little-endian:
//
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x   { string key | u32 type | value }           metadata (arrays: u32 type, u64 n)
//   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] | u32 ggml_type | u64 offset }
//   padding to general.alignment (32) | tensor data (each offset aligned, relative to here)
//
// Strings are u64 length + bytes. Dims are listed innermost first: a [out, in] row-major matrix
// is stored with dims {in, out}. The file is mapped; every count, length, offset and size is
// checked against it before use, and before it sizes any allocation. A malformed file is an
// INVALID_ARGUMENT naming the field, never a crash.
#ifndef PAGODA_COMMON_MODEL_GGUF_FILE_H_
#define PAGODA_COMMON_MODEL_GGUF_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/ggml_quant.h"
#include "common/model/tensor_view.h"

namespace pagoda {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian

// Metadata value types.
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

struct GgufValue {
  GgufType type;
  GgufType element_type;                   // arrays only
  uint64_t count = 1;                      // elements of an array
  const uint8_t* data;                     // the scalar, or the first element of a numeric array
  std::vector<absl::string_view> strings;  // the string, or a string array's elements
};

struct GgufTensor {
  GgmlType type;
  std::vector<int64_t> dims;  // innermost first, as in the file
  uint64_t offset = 0;        // into the data section
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::map<std::string, GgufTensor, std::less<>>& tensors() const { return tensors_; }
  bool HasTensor(absl::string_view name) const { return tensors_.contains(name); }

  // Typed metadata; INVALID_ARGUMENT naming the key when it has another type, NOT_FOUND when
  // absent (the *Or forms return `fallback` then).
  absl::StatusOr<int64_t> Int(absl::string_view key) const;  // any integer type
  absl::StatusOr<int64_t> IntOr(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<double> FloatOr(absl::string_view key, double fallback) const;  // f32 / f64
  absl::StatusOr<bool> BoolOr(absl::string_view key, bool fallback) const;
  absl::StatusOr<std::string> StringOr(absl::string_view key, std::string fallback) const;
  absl::StatusOr<std::vector<absl::string_view>> StringArray(absl::string_view key) const;
  absl::StatusOr<std::vector<float>> FloatArray(absl::string_view key) const;    // f32
  absl::StatusOr<std::vector<int32_t>> Int32Array(absl::string_view key) const;  // i32

  // The tensor as the file stores it, a 1-D tensor as one row; `shape` as for Read.
  absl::StatusOr<TensorView> View(absl::string_view name, std::span<const int64_t> shape) const;

  // The tensor as float32 (dequantized); `shape` is row-major, outermost first (the reverse
  // of the file's dims). INVALID_ARGUMENT naming the tensor when the shape differs.
  absl::StatusOr<std::vector<float>> Read(absl::string_view name,
                                          std::span<const int64_t> shape) const;

 private:
  GgufFile(std::string path, const uint8_t* map, size_t size)
      : path_(std::move(path)), map_(map), size_(size) {}
  absl::Status Parse();
  absl::StatusOr<const GgufValue*> Find(absl::string_view key) const;

  const std::string path_;
  const uint8_t* const map_;
  const size_t size_;
  uint32_t version_ = 0;
  const uint8_t* data_ = nullptr;  // the tensor data section
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::map<std::string, GgufTensor, std::less<>> tensors_;
};

// Whether the file at `path` starts with the GGUF magic.
bool IsGgufFile(const std::string& path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_GGUF_FILE_H_
