// How the scheduler runs a step on one worker: in the same process or over a gRPC stream.
#ifndef PAGODA_COMMON_EXECUTOR_H_
#define PAGODA_COMMON_EXECUTOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/step.h"

namespace pagoda {

// What a worker offers, sent once when it starts (and in the gRPC Hello).
// A LoRA adapter a worker holds (--lora-modules, or loaded at run time).
struct AdapterInfo {
  std::string name;  // what NewSequence::adapter names it by
  int rank = 0;
  std::string digest;  // of its files (LoraAdapter::digest): the same name, the same weights?
};

// A LoRA adapter loaded or unloaded at run time (issue 39: the router's /v1/load_lora_adapter
// and /v1/unload_lora_adapter).
struct AdapterChange {
  std::string name;
  std::string path;  // load it from here; "": unload it
};

struct WorkerInfo {
  std::string model_fingerprint;
  int num_blocks = 0;
  int block_size = 0;
  int max_num_batched_tokens = 0;  // the largest step (in tokens) its buffers hold
  int max_num_seqs = 0;            // the most sequences one step may schedule
  std::string kv_cache_dtype;      // "f32", "bf16", "f16", "int8"; informational ("" when unknown)
  // host:port where peers pull its KV blocks; "" = it neither serves nor pulls (issue 28).
  std::string kv_transfer_address = {};
  // The adapters it holds, by name; a step's sequences may name any of them.
  std::vector<AdapterInfo> adapters = {};
  int max_loras = 0;      // the most distinct adapters in one step
  int max_cpu_loras = 0;  // the most distinct adapters its running sequences may name
  // A pipeline stage (issue 40) holds layers [layer_begin, layer_end) of the model; a whole
  // worker [0, num_layers). layer_end 0: not said (an older worker): the whole model.
  int layer_begin = 0;
  int layer_end = 0;
};

// A full block of a worker's KV pool that it can vouch for (worker/kv_ledger.h), offered when it
// joins a router so that the router's prefix cache covers what the pool still holds.
struct CachedBlock {
  int block = 0;            // the pool's block id
  int parent = -1;          // index of the block before it among those offered; -1: a first block
  std::vector<int> tokens;  // the block's tokens (block_size of them)
};

// The most tokens a Hello's cached blocks carry (~2 MB on the wire, within the router's 4 MB
// message limit); a worker offers its longest chains first up to this.
inline constexpr int kMaxCachedBlockTokens = 1 << 19;

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const WorkerInfo& info() const = 0;
  // Runs one step. An error means the worker is unusable (the caller reschedules elsewhere);
  // a bad command is INVALID_ARGUMENT and leaves the worker's state as it was.
  virtual absl::StatusOr<StepResult> Execute(const StepCommand& command) = 0;
  // The blocks its pool held when it joined, each after its parent (once: later calls return
  // nothing). Untrusted: the router checks them (ValidateCachedBlocks).
  virtual std::vector<CachedBlock> TakeCachedBlocks() { return {}; }
  // Loads or unloads an adapter between steps; a load answers with what the worker holds of
  // it. The worker's errors (NOT_FOUND, ALREADY_EXISTS, INVALID_ARGUMENT for a bad file or a
  // path outside its --lora-dir, ...) leave it as it was.
  virtual absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& /*change*/) {
    return absl::UnimplementedError("this worker cannot load LoRA adapters");
  }
  // The caller gave up on this worker (a step failed, or its result did not check out): a
  // transport ends its connection, so the worker notices and can join again afresh.
  virtual void Abandon() {}
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_EXECUTOR_H_
