// A worker's Hello, checked before the Cluster sizes anything by it (DESIGN §5).
#ifndef PAGODA_ROUTER_CORE_WORKER_LIMITS_H_
#define PAGODA_ROUTER_CORE_WORKER_LIMITS_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "common/executor.h"

namespace pagoda {

// LoRA adapters one worker's Hello may list at most.
inline constexpr int kMaxWorkerAdapters = 1024;

// What the router accepts from a worker's Hello. Everything in it crosses a port: ranges bound
// the router's memory per worker (a block costs the router ~50 bytes of pool state) and keep
// every slot index inside 32 bits.
struct WorkerLimits {
  int max_workers = 256;         // connected at once
  int max_num_blocks = 1 << 21;  // per worker (2M blocks: ~100 MB of router state)
  // Over the live workers: the router's memory budget for block state (4M blocks: ~200 MB;
  // a 64 GB bf16 KV cache of Llama-3-8B is 32K blocks of 16 tokens).
  int64_t max_total_blocks = int64_t{1} << 22;
  int max_block_size = 1024;             // tokens per block
  int max_num_batched_tokens = 1 << 20;  // per step
  int max_num_seqs = 1 << 16;            // per step
};

// OK when `info` fits `limits`; INVALID_ARGUMENT naming the bad field otherwise.
absl::Status ValidateWorkerInfo(const WorkerInfo& info, const WorkerLimits& limits);

// OK when the blocks a worker of `info` offers as cached (Hello.cached_blocks) are well formed:
// at most kMaxCachedBlockTokens tokens, distinct block ids of its pool, each parent an earlier
// entry, block_size token ids below `vocab_size` each. INVALID_ARGUMENT naming the first bad one.
// REQUIRES: ValidateWorkerInfo(info) passed.
absl::Status ValidateCachedBlocks(std::span<const CachedBlock> cached, const WorkerInfo& info,
                                  int vocab_size);

// Whether a worker of `info` may join `live_workers` workers holding `live_blocks` blocks:
// RESOURCE_EXHAUSTED when the router is at max_workers or the blocks would pass
// max_total_blocks.
absl::Status CheckRoomFor(const WorkerInfo& info, int live_workers, int64_t live_blocks,
                          const WorkerLimits& limits);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_WORKER_LIMITS_H_
