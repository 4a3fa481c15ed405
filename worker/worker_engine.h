// A worker's compute: executes StepCommands against its model and KV pool. It decides
// nothing; the router chose the sequences, tokens, blocks and copies. It keeps, per sequence,
// the block table, the token history (for penalties) and the sampling parameters.
// Not thread-safe: one step at a time.
#ifndef PAGODA_WORKER_WORKER_ENGINE_H_
#define PAGODA_WORKER_WORKER_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/executor.h"
#include "common/model/model_weights.h"
#include "common/step.h"
#include "worker/kv_pool.h"
#include "worker/llama_model.h"
#include "worker/sampler.h"

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
};

// The auto KV size (WorkerOptions::kv_cache_bytes = 0): `fraction` of `available_bytes`,
// at most `max_tokens` tokens of `bytes_per_token`.
int64_t AutoKvCacheBytes(int64_t available_bytes, double fraction, int64_t bytes_per_token,
                         int64_t max_tokens);
// --kv-cache-mb: "auto" is 0 (WorkerOptions' auto), else a positive number of MiB in bytes.
absl::StatusOr<int64_t> ParseKvCacheMb(const std::string& flag);
// --kv-cache-dtype: f32, bf16, f16, or auto. Auto follows the weights, which are f32 today, so
// it is f32 (16-bit weights will make it bf16).
absl::StatusOr<KvDtype> ParseKvCacheDtype(const std::string& flag);
// MemAvailable of /proc/meminfo in bytes; 0 where unknown.
int64_t MemAvailableBytes();

class WorkerEngine {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerEngine>> Create(ModelWeights weights,
                                                              const WorkerOptions& options);

  const WorkerInfo& info() const { return info_; }
  const ModelConfig& config() const { return model_->config(); }
  // INVALID_ARGUMENT for a command that does not fit this worker's state (nothing changes).
  absl::StatusOr<StepResult> Execute(const StepCommand& command);
  int num_sequences() const { return static_cast<int>(seqs_.size()); }
  // Forgets every sequence (a new router connection starts from an empty pool).
  void Reset() { seqs_.clear(); }

 private:
  struct SequenceState {
    SamplingParams sampling;
    int seq_index = 0;
    int num_prompt_tokens = 0;
    std::vector<int> tokens;       // prompt then output, as far as known
    std::vector<int> block_table;  // physical block ids, in order
  };

  WorkerEngine(std::unique_ptr<LlamaModel> model, const WorkerOptions& options, int num_blocks);
  absl::Status Validate(const StepCommand& command) const;

  // Constant after construction.
  WorkerInfo info_;
  std::unique_ptr<LlamaModel> model_;
  KvPool kv_;
  Sampler sampler_;

  absl::flat_hash_map<int64_t, SequenceState> seqs_;
  // Per-step scratch, reused so a step allocates only when it outgrows the last one.
  std::vector<int> token_ids_, positions_, logit_rows_;
  std::vector<int64_t> slots_;
  std::vector<AttentionSequence> attention_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_ENGINE_H_
