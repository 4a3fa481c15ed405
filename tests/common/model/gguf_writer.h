// GGUF files for tests: a writer of metadata and tensors, the Q8_0 quantizer, and whole models
// laid out as llama.cpp's converter lays them out. (Pagoda itself writes GGUF only in
// pagoda-make-model, streamed.)
#ifndef PAGODA_TESTS_COMMON_MODEL_GGUF_WRITER_H_
#define PAGODA_TESTS_COMMON_MODEL_GGUF_WRITER_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/model/gguf_file.h"
#include "common/model/gguf_writer.h"
#include "common/model/model_weights.h"

namespace pagoda::testing {

// Q8_0 blocks of 32 values (f16 scale + 32 int8), as llama.cpp quantizes them.
std::vector<uint8_t> QuantizeQ8_0(std::span<const float> values);

// Writes a GGUF v3 file, metadata and tensors in the order added, each tensor's bytes held
// until Write (pagoda::GgufStreamWriter, which this fills, streams them).
class GgufWriter {
 public:
  void AddU32(const std::string& key, uint32_t v) { stream_.AddU32(key, v); }
  void AddI32(const std::string& key, int32_t v) { stream_.AddI32(key, v); }
  void AddF32(const std::string& key, float v) { stream_.AddF32(key, v); }
  void AddBool(const std::string& key, bool v) { stream_.AddBool(key, v); }
  void AddString(const std::string& key, const std::string& v) { stream_.AddString(key, v); }
  void AddStringArray(const std::string& key, const std::vector<std::string>& v) {
    stream_.AddStringArray(key, v);
  }
  void AddF32Array(const std::string& key, const std::vector<float>& v) {
    stream_.AddF32Array(key, v);
  }
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v) {
    stream_.AddI32Array(key, v);
  }
  void AddHyperparameters(const ModelConfig& c, const std::string& arch) {
    AddGgufHyperparameters(c, arch, &stream_);
  }
  // `shape` row-major (outermost first); `data` already in `type`'s encoding.
  void AddTensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                 std::vector<uint8_t> data);
  void AddF32Tensor(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& values);
  // Once.
  absl::Status Write(const std::string& path);

 private:
  GgufStreamWriter stream_;
  std::vector<std::vector<uint8_t>> data_;  // each tensor's bytes, in order
};

// `values` encoded as `type` (F32, F16, BF16 or Q8_0).
std::vector<uint8_t> EncodeGgml(const std::vector<float>& values, GgmlType type);

// Writes `w` as llama.cpp names it, matrices in `type`, vectors in F32 (as llama.cpp does);
// `arch` is llama, qwen2 or qwen3. CHECK-fails when the file cannot be written.
void WriteGgufModel(const ModelWeights& w, const std::string& arch, GgmlType type,
                    const std::string& path);

// The bytes of a small valid llama model (one layer, vocabulary 64, F32), to mutate.
std::string TinyGgufModelBytes();
// A file that must be refused, and words its error must hold.
struct BadGguf {
  std::string name, bytes, message;
};
// `good` edited by `edit`.
BadGguf MutatedGguf(const std::string& good, const std::string& name,
                    const std::function<void(std::string&)>& edit, const std::string& message);
// Where tensor `name`'s info (n_dims, dims, type, offset) starts in GGUF `bytes`.
size_t GgufTensorInfoAt(const std::string& bytes, const std::string& name);
// Overwrites sizeof(T) bytes of `s` at `at` with `v`.
template <typename T>
void PutAt(std::string* s, size_t at, T v) {
  std::memcpy(s->data() + at, &v, sizeof(T));
}

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_COMMON_MODEL_GGUF_WRITER_H_
