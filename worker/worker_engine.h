// A worker's compute: executes StepCommands against its model and KV pool. It decides
// nothing; the router chose the sequences, tokens, blocks and copies. It keeps, per sequence,
// the block table, the token history (for penalties) and the sampling parameters.
// Not thread-safe: one step at a time.
#ifndef PAGODA_WORKER_WORKER_ENGINE_H_
#define PAGODA_WORKER_WORKER_ENGINE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/executor.h"
#include "common/model/model_weights.h"
#include "common/model/weight_source.h"
#include "common/step.h"
#include "worker/kv_disk_cache.h"
#include "worker/kv_ledger.h"
#include "worker/kv_pool.h"
#include "worker/llama_model.h"
#include "worker/lora_batch.h"
#include "worker/lora_registry.h"
#include "worker/sampler.h"
#include "worker/stage_link.h"
#include "worker/step_validator.h"
#include "worker/transfer/kv_puller.h"
#include "worker/transfer/kv_transfers.h"
#include "worker/worker_options.h"

namespace pagoda {

// Models whose packed weights are smaller than this run on one compute thread.
inline constexpr size_t kSingleThreadWeightBytes = size_t{16} << 20;

class WorkerEngine {
 public:
  // Packs the weights from `source` (whose file pages it releases as it goes).
  static absl::StatusOr<std::unique_ptr<WorkerEngine>> Create(const WeightSource& source,
                                                              const WorkerOptions& options);
  // Over weights already widened to f32 (tests): auto follows weights.stored_precision.
  static absl::StatusOr<std::unique_ptr<WorkerEngine>> Create(ModelWeights weights,
                                                              const WorkerOptions& options);

  const WorkerInfo& info() const { return info_; }
  // The layers it holds (WorkerOptions::layers; every layer by default).
  LayerRange layers() const { return model_->layers(); }
  const ModelConfig& config() const { return model_->config(); }
  // Bytes of the packed weights (LlamaModel::weight_bytes).
  size_t weight_bytes() const { return model_->weight_bytes(); }
  // INVALID_ARGUMENT for a command that does not fit this worker's state (nothing changes).
  absl::StatusOr<StepResult> Execute(const StepCommand& command);
  int num_sequences() const { return static_cast<int>(seqs_.size()); }
  // Forgets every sequence (a new router connection starts from an empty pool) and cancels the
  // pulls in flight.
  // A pipeline stage's link to its neighbours (issue 40): a stage that does not hold every
  // layer refuses steps with tokens (FAILED_PRECONDITION) until it has one. REQUIRES: before
  // the first step.
  void SetStageLink(std::unique_ptr<StageLink> link) { stage_link_ = std::move(link); }
  // Runtime LoRA adapters (issue 39; the router's LoadAdapter / UnloadAdapter): LoraRegistry's
  // errors; info().adapters follows. Between steps only.
  absl::Status LoadAdapter(const std::string& name, const std::string& path);
  absl::Status UnloadAdapter(const std::string& name);

  void Reset() {
    seqs_.clear();
    transfers_.CancelAll();
    if (stage_link_) stage_link_->Reset();
  }
  // The router's call ended: a step waiting for a stage before's activations gives up now
  // (StageLink::Interrupt). Thread-safe, unlike the rest: any thread may call it mid-step.
  void InterruptStage() {
    if (stage_link_) stage_link_->Interrupt();
  }

  // KV block transfers (issue 28; the pulls in flight are KvTransfers'). Pulls (StepCommand.pulls)
  // are refused until this is called; `advertise_address` goes in info().kv_transfer_address.
  // REQUIRES: before the first step.
  void EnableTransfers(std::unique_ptr<KvPuller> puller, const std::string& advertise_address);
  // The pool a KV transfer server reads (kv_transfer_service.h). Not thread-safe to read while a
  // step writes the same blocks: the router's contract keeps them apart.
  const KvPool& kv_pool() const { return kv_; }
  // The full blocks of the pool it can vouch for (KvLedger::Export), for a router's Hello.
  std::vector<CachedBlock> CachedBlocks(int max_blocks) const { return ledger_.Export(max_blocks); }

  // --kv-cache-dir (issue 38): opens the directory, loads the blocks it keeps for this model into
  // the pool (so the Hello offers them), and from now on writes blocks out before a step
  // overwrites them. KvDiskStore::Open's errors. REQUIRES: before the first step.
  absl::Status EnableDiskCache(const KvDiskCacheOptions& options);
  // At drain: writes every block the ledger vouches for (bounded by options.max_save).
  void SaveToDisk() {
    if (disk_) disk_->SaveAll(kv_, ledger_);
  }
  const KvDiskCache* disk_cache() const { return disk_.get(); }

 private:
  struct SequenceState {
    SamplingParams sampling;
    int seq_index = 0;
    int num_prompt_tokens = 0;
    std::vector<int> tokens;       // prompt then output, as far as known
    std::vector<int> block_table;  // physical block ids, in order
    std::vector<int> stop_ids;     // masked until sampling.min_tokens are out (NewSequence)
    Pooling pooling = Pooling::kNone;
    bool salted = false;         // a tenant's: its blocks are never offered to another router
    std::vector<double> pooled;  // (dim) mean pooling: the sum of the rows computed so far
    int num_pooled_rows = 0;
    std::string adapter;                     // NewSequence::adapter; "" = the base model
    std::shared_ptr<const PackedLora> lora;  // held until the sequence ends
  };
  // Folds an embedding sequence's hidden rows of this step into its state; at the prompt's end
  // appends the pooled, normalized vector to `result`. `rows`: (n, dim).
  void Pool(int64_t seq_id, SequenceState& s, const float* rows, int n, bool last_chunk,
            StepResult* result);

  WorkerEngine(std::unique_ptr<LlamaModel> model, const WorkerOptions& options, int num_blocks,
               std::unique_ptr<LoraRegistry> loras);
  // validator_'s check against the sequences held, then the transfers'.
  absl::Status Validate(const StepCommand& command) const;
  // Hands the disk cache every block this step overwrites, before anything is written.
  void SaveBlocksAboutToChange(const StepCommand& command);

  // Constant after construction.
  WorkerInfo info_;
  std::unique_ptr<LlamaModel> model_;
  KvPool kv_;
  KvLedger ledger_;  // what kv_'s blocks hold, for the next router (issue 38)
  Sampler sampler_;
  std::unique_ptr<LoraRegistry> loras_;
  StepValidator validator_;  // after what it reads: the model's limits, kv_, loras_

  absl::flat_hash_map<int64_t, SequenceState> seqs_;
  // Per-step scratch, reused so a step allocates only when it outgrows the last one.
  std::vector<int> token_ids_, positions_, logit_rows_, hidden_rows_;
  std::vector<int64_t> slots_;
  std::vector<AttentionSequence> attention_;
  LoraBatch lora_batch_;
  std::vector<uint64_t> allowed_;          // a constrained sequence's mask, from its allowed ids
  std::unique_ptr<KvDiskCache> disk_;      // --kv-cache-dir; null = off
  std::unique_ptr<StageLink> stage_link_;  // a pipeline stage's; null = a whole worker
  std::vector<float> hidden_in_;           // (T, dim): the stage before's residual stream
  // Last: destroyed first, its threads joined before the pool they write goes.
  KvTransfers transfers_{&kv_};
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_ENGINE_H_
