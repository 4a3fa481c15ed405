// What a worker is told to be (WorkerOptions), and the parsers of the flags that say it: the
// worker's own and `pagoda run`'s. "auto" values are resolved here too, except the KV size,
// which WorkerEngine::Create computes once the weights are loaded (AutoKvCacheBytes).
#ifndef PAGODA_WORKER_WORKER_OPTIONS_H_
#define PAGODA_WORKER_WORKER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype_names.h"
#include "common/model/ggml_quant.h"
#include "common/model/layer_range.h"

namespace pagoda {

struct WorkerOptions {
  int block_size = 16;
  // KV pool size, rounded down to whole blocks. 0 = auto, as vLLM sizes its pool: the share
  // kv_cache_memory_fraction of the memory available (MemAvailable) once the weights are
  // loaded, capped at what max_num_seqs sequences of the model's whole context need.
  int64_t kv_cache_bytes = 0;
  double kv_cache_memory_fraction = 0.5;  // of MemAvailable; leaves room for the OS and router
  int num_blocks = 0;                     // > 0 overrides kv_cache_bytes (tests)
  // K/V element type; a 16-bit one fits twice the blocks in kv_cache_bytes.
  KvDtype kv_cache_dtype = KvDtype::kF32;
  int max_num_batched_tokens = 2048;  // the largest step, in tokens
  int max_num_seqs = 256;             // the most sequences in one step
  int threads = 0;                    // OpenMP threads; 0 = the runtime's default
  // How every matrix is stored; unset = auto: AutoWeightDtype of each tensor's stored type.
  std::optional<WeightDtype> weight_dtype;
  // What bf16 matrices are multiplied in: auto = bf16 where the CPU has AVX512_BF16 (a bf16
  // checkpoint's own arithmetic), f32 = exact products of the bf16 weights (Linear).
  ComputeDtype compute_dtype = ComputeDtype::kAuto;
  // --rope-scaling: a JSON object as config.json's rope_scaling, applied to the model's own
  // (ApplyRopeScalingFlag) by whoever opens the weights; "": the model's files decide.
  std::string rope_scaling;
  // LoRA adapters (issue 39): NAME=PATH pairs loaded at start, the most held in memory (least
  // recently used evicted, never one a sequence uses; evicted ones are read again when asked
  // for), the most distinct adapters in one step, and the directories adapter paths must lie
  // in (empty: the directories of lora_modules' paths).
  struct LoraModule {
    std::string name, path;
  };
  std::vector<LoraModule> lora_modules;
  int max_cpu_loras = 8;
  int max_loras = 4;
  // What adapters are packed in: kF32 or kBf16 (half the bytes each step reads; measured in
  // tests/worker/lora_test.cc). Unset = auto: f32 over a model stored in f32 (its adapters'
  // tokens exact), bf16 over any other (16-bit or quantized weights).
  std::optional<WeightDtype> lora_dtype;
  std::vector<std::string> lora_dirs;
  // --layers=A:B (issue 40): a pipeline stage holding layers A..B-1; unset = every layer.
  std::optional<LayerRange> layers;
  // Called while the weights load, with the bytes read so far and in all (LoadReportClient).
  std::function<void(int64_t done, int64_t total)> on_load_progress;
};

// --weight-dtype: "auto" (nullopt), "f32", "bf16" or "int8"; INVALID_ARGUMENT naming the flag
// otherwise.
absl::StatusOr<std::optional<WeightDtype>> ParseWeightDtype(const std::string& flag);
// What auto stores a matrix as, by the type its checkpoint stored it in: each value kept
// exactly where a kernel can hold it. F32 and F16 → f32 (bf16 would drop 3 of f16's mantissa
// bits), BF16 → bf16, Q8_0 → int8, Q4_0 and Q4_K → int4, Q6_K → q6_k (each its blocks as
// they are).
WeightDtype AutoWeightDtype(GgmlType stored);

// --lora-dtype: "auto" (nullopt), "f32" or "bf16"; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<std::optional<WeightDtype>> ParseLoraDtype(const std::string& flag);

// One --lora-modules value, NAME=PATH (both non-empty); INVALID_ARGUMENT naming the flag
// otherwise. The name's characters are LoraRegistry's to check.
absl::StatusOr<WorkerOptions::LoraModule> ParseLoraModule(const std::string& flag);

// --kv-cache-mb: "auto" is 0 (WorkerOptions' auto), else a positive number of MiB in bytes;
// INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<int64_t> ParseKvCacheMb(const std::string& flag);
// --kv-cache-dtype: f32, bf16, f16, int8, or auto, which is f32 whatever the weights: 16-bit and
// int8 K and V change tokens (a bf16 checkpoint with auto gives its f32 widening's tokens exactly),
// so they are asked for. INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<KvDtype> ParseKvCacheDtype(const std::string& flag);

// The auto KV size (WorkerOptions::kv_cache_bytes = 0): `fraction` of `available_bytes`,
// at most `max_tokens` tokens of `bytes_per_token`.
int64_t AutoKvCacheBytes(int64_t available_bytes, double fraction, int64_t bytes_per_token,
                         int64_t max_tokens);
// MemAvailable of /proc/meminfo in bytes; 0 where unknown.
int64_t MemAvailableBytes();
// This process's peak resident memory (VmHWM of /proc/self/status) in bytes; 0 where unknown.
int64_t PeakResidentBytes();

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_OPTIONS_H_
