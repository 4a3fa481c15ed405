// Writes a GGUF v3 file as llama.cpp reads it: metadata and tensor infos first, then each
// tensor's bytes in the order declared, streamed, so a model larger than memory can be written
// (pagoda-make-model's 8B shape in 16 bits is 16 GB).
#ifndef PAGODA_COMMON_MODEL_GGUF_WRITER_H_
#define PAGODA_COMMON_MODEL_GGUF_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/model/ggml_quant.h"
#include "common/model/model_config.h"

namespace pagoda {

class GgufStreamWriter {
 public:
  GgufStreamWriter() = default;
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;
  ~GgufStreamWriter();

  // Metadata, in the order added. Only before Open.
  void AddU32(const std::string& key, uint32_t v);
  void AddI32(const std::string& key, int32_t v);
  void AddF32(const std::string& key, float v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddF32Array(const std::string& key, const std::vector<float>& v);
  void AddI32Array(const std::string& key, const std::vector<int32_t>& v);

  // Declares the next tensor: `shape` row-major (outermost first), its bytes `type`'s encoding
  // of shape's product of elements (whole blocks per row for the block types). Only before Open.
  void AddTensorInfo(const std::string& name, std::vector<int64_t> shape, GgmlType type);

  // Writes the header, the metadata and the tensor infos to `path`.
  absl::Status Open(const std::string& path);
  // The next bytes of the tensors, in the order declared (a call may end mid-tensor or span
  // several). FAILED_PRECONDITION past the last tensor's end.
  absl::Status Append(std::span<const uint8_t> bytes);
  // Flushes and closes; FAILED_PRECONDITION when a declared tensor is not complete.
  absl::Status Close();

  // Bytes of `count` elements of `type` (whole blocks), 0 when `count` is not whole blocks.
  static uint64_t TensorBytes(GgmlType type, int64_t count);

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    uint64_t bytes;
  };
  absl::Status Write(const void* data, size_t size);
  absl::Status Pad();

  std::vector<std::pair<std::string, std::string>> kvs_;  // key, encoded type + value
  std::vector<Tensor> tensors_;
  std::string path_;
  FILE* file_ = nullptr;
  uint64_t position_ = 0;  // bytes written to the file
  size_t tensor_ = 0;      // the tensor Append is filling
  uint64_t filled_ = 0;    // its bytes so far
};

// `c`'s hyperparameters as llama.cpp's converter writes them for `arch` (llama, qwen2, qwen3):
// the sizes, the norm's epsilon, RoPE's base, and YaRN's or linear scaling (Llama 3's scaling
// is a tensor, rope_freqs.weight, which the caller writes).
void AddGgufHyperparameters(const ModelConfig& c, const std::string& arch, GgufStreamWriter* g);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_GGUF_WRITER_H_
