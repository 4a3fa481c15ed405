// The router's core over one worker: validates requests, turns them into sequences, and runs
//
//   Step() = Schedule() → Execute() → Postprocess()
//
// It works in token ids; text (detokenization, stop strings) is the caller's. The gRPC router
// and `pagoda run` drive it the same way; only the Executor differs.
// Thread-compatible: one thread calls everything.
#ifndef PAGODA_ROUTER_CORE_ENGINE_H_
#define PAGODA_ROUTER_CORE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "common/model/model_config.h"
#include "router/core/constraint.h"
#include "router/core/scheduler.h"
#include "router/spec/speculative.h"
#include "router/transfer/agent.h"
#include "router/transfer/orders.h"

namespace pagoda {

struct EngineOptions {
  KvReservation kv_reservation = KvReservation::kOnDemand;
  bool enable_prefix_caching = true;
  int max_num_batched_tokens = 2048;  // capped by the worker's limit
  int max_num_seqs = 256;             // capped by the worker's limit
  int max_model_len = 0;              // 0 = the model's context length
  int max_n = 16;                     // samples per request at most
  SpeculativeOptions speculative;     // off by default
  // The secret the prefix cache's block hashes are keyed with (PrefixRoot). The Cluster draws
  // a random one when it is 0; an Engine on its own keeps 0.
  uint64_t prefix_cache_key = 0;
};

// Where a request came from, as its transport sees it: the client (its IP address) and the
// connection (an HTTP/2 connection or an HTTP socket: the address with its port). Empty: not
// counted toward any cap.
struct RequestPeer {
  std::string client;
  std::string connection;
};

struct GenerationRequest {
  std::vector<int> prompt_ids;  // non-empty, each in [0, vocab)
  SamplingParams sampling;
  // >= 1 (0 when only the prompt's log probabilities are asked); unset = up to the model
  // length. An embedding has none.
  std::optional<int> max_tokens;
  int n = 1;                        // parallel samples sharing the prompt's KV
  std::vector<int> stop_token_ids;  // extra stop tokens
  bool ignore_eos = false;          // keep going past the model's EOS ids
  // Not kNone: embed the prompt (n = 1, no max_tokens, no prompt_logprobs); its one update
  // carries the vector.
  Pooling pooling = Pooling::kNone;
  // Resuming one sequence elsewhere (after a worker failure): its index among the request's n
  // samples and the tokens it had generated. REQUIRES: n == 1 when output_ids is set.
  int first_seq_index = 0;
  std::vector<int> output_ids;
  bool front_of_queue = false;  // queue ahead of waiting requests (moved from a dead worker)
  // Set by the transport while its client is not reading: the request's sequences are not
  // scheduled meanwhile. Null: never paused.
  std::shared_ptr<const std::atomic<bool>> paused;
  // Who sent it, for the caps on paused sequences (ClusterOptions::max_paused_per_*).
  RequestPeer peer;
  // The chained hashes (HashBlock) of the prompt's full blocks of prompt_block_size tokens, when
  // the caller has them (the Cluster hashes the prompt to place it): a scheduler with the same
  // block size starts from them instead of hashing the prompt again. REQUIRES: computed by
  // BlockHashes(prompt_ids, prompt_block_size), or empty.
  std::vector<uint64_t> prompt_block_hashes;
  int prompt_block_size = 0;
  // Tenants: requests share cached blocks only under one cache_salt (at most kMaxCacheSaltBytes;
  // empty: none). prefix_root is PrefixRoot(EngineOptions::prefix_cache_key, cache_salt), the
  // parent of the prompt's first block hash, set by the Cluster at Submit for placement and
  // transfers (the Engine computes its own); prompt_block_hashes chain from it.
  std::string cache_salt;
  uint64_t prefix_root = 0;
  // The LoRA adapter it runs under (issue 39), by the name workers' Hello lists it; empty: the
  // base model. At most kMaxAdapterNameBytes. It keys the prefix cache as a salt does.
  std::string adapter;
  // Structured output: only text the grammar accepts is sampled, and a sequence whose grammar
  // is complete with nothing left to add stops. Its vocabulary is the model's. Null: none.
  std::shared_ptr<const Constraint> constraint;
};

// Extra stop token ids per request at most: each sampled token is compared with all of them.
inline constexpr int kMaxStopTokenIds = 128;
inline constexpr int kMaxCacheSaltBytes = 1024;
// A LoRA adapter's name at most (as worker.proto's Adapter.name).
inline constexpr int kMaxAdapterNameBytes = 128;

// INVALID_ARGUMENT naming the field when `request` can never run on `config` with sequences of
// at most `max_model_len` tokens and at most `max_n` samples. The one check of a request's
// content; a worker's own limit (its pool) is Engine::AddValidatedRequest's.
absl::Status ValidateRequest(const GenerationRequest& request, const ModelConfig& config,
                             int max_model_len, int max_n);
// The part of ValidateRequest that costs O(1): everything but the scans of the token ids.
absl::Status ValidateRequestLimits(const GenerationRequest& request, int max_model_len, int max_n);

class Engine {
 public:
  // `executor` is not owned and must outlive the engine.
  Engine(const ModelConfig& config, Executor* executor, const EngineOptions& options);

  // Queues a request under the caller's id: sequence i of it reports `request_id` and seq_index
  // first_seq_index + i. INVALID_ARGUMENT naming the field for a bad request (ValidateRequest)
  // or one that can never fit this worker; ALREADY_EXISTS when one of its seq_index values
  // is already queued or running under `request_id`.
  absl::Status AddRequest(int64_t request_id, const GenerationRequest& request);
  // The same for a request that passed ValidateRequest with this engine's model, max_model_len()
  // and max_n (the Cluster checks once for all workers): checks only this worker's pool.
  absl::Status AddValidatedRequest(int64_t request_id, const GenerationRequest& request);
  // Finishes every sequence of the request here and frees their blocks.
  void AbortRequest(int64_t request_id);
  // Finishes one sequence of the request (by its seq_index). Returns whether one was running.
  bool AbortSequence(int64_t request_id, int seq_index);
  // One step; an error means the worker failed (or answered something other than the step).
  absl::StatusOr<std::vector<SequenceUpdate>> Step();
  // Called in Step() between scheduling and executing (to publish the scheduler's counts while
  // the step runs).
  void set_after_schedule(std::function<void()> hook) { after_schedule_ = std::move(hook); }

  // KV transfers (issue 28): holds, releases and events are the agent's.
  TransferAgent& transfers() { return transfers_; }
  const TransferAgent& transfers() const { return transfers_; }
  // Queues a request that first pulls `plan` (reported in transfers().TakeEvents().pulled),
  // then runs from those blocks; when the pull fails it computes them. The same errors as
  // AddValidatedRequest, before anything is pulled.
  absl::Status AddPulledRequest(int64_t request_id, const GenerationRequest& request,
                                PullPlan plan);
  // Takes the running sequences out (Scheduler::DetachRunning), their blocks held until
  // transfers().Release; the engine forgets them without an update.
  std::vector<Scheduler::Detached> DetachRunning();
  // Takes sequences waiting after a preemption out (Scheduler::DetachPreempted), likewise.
  std::vector<Scheduler::Detached> DetachPreempted(int max_blocks);

  // Work for Step(): sequences to run, pulls in flight, or holds waiting for a computation.
  bool has_unfinished() const { return scheduler_.has_work() || transfers_.has_work(); }
  // Query tokens of the last Step() (0 when it ran nothing).
  int last_step_tokens() const { return last_step_tokens_; }
  // The worker's forward-pass time in the last Step() (0 when it ran nothing).
  double last_forward_seconds() const { return last_forward_seconds_; }
  const Scheduler& scheduler() const { return scheduler_; }
  // Caches the blocks the worker's pool holds (validated: ValidateCachedBlocks) and returns
  // their chained hashes. REQUIRES: before the first step.
  std::vector<uint64_t> AdoptCachedBlocks(std::span<const CachedBlock> cached) {
    return scheduler_.mutable_kv().Adopt(cached, options_.prefix_cache_key);
  }
  int max_model_len() const { return scheduler_.options().max_model_len; }

 private:
  absl::Status CheckAddable(int64_t request_id, const GenerationRequest& r) const;
  // Queues r's sequences; a pulled request's first takes the partial block its pull brought.
  absl::Status AddSequence(int64_t request_id, const GenerationRequest& r,
                           std::optional<PulledTail> tail);
  // Forgets detached sequences (they go on elsewhere); their blocks count as held.
  void Forget(const std::vector<Scheduler::Detached>& detached);

  const ModelConfig config_;
  const EngineOptions options_;
  Executor* executor_;                       // Not owned.
  std::unique_ptr<DraftProposer> proposer_;  // null: no speculative decoding
  Scheduler scheduler_;
  // Request id -> its unfinished sequences here: seq_index -> sequence id. A request may come
  // in parts (sequences resumed after a worker failure), so the map grows as they arrive.
  absl::flat_hash_map<int64_t, absl::flat_hash_map<int, int64_t>> requests_;
  int64_t next_seq_id_ = 0;  // sequence ids are the engine's own: the worker sees only these
  double last_forward_seconds_ = 0;
  int last_step_tokens_ = 0;
  std::function<void()> after_schedule_;
  TransferAgent transfers_;  // after scheduler_, which it borrows
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_ENGINE_H_
