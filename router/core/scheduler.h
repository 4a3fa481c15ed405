// The scheduler for one worker (vLLM v1 style): no separate prefill and decode phases. Each
// sequence has num_computed_tokens, and a step gives it tokens until it catches up:
//
//   Schedule():  forks due → running sequences first (a decode is 1 token, a prefill a chunk
//                within the token budget; out of blocks → preempt the newest by recompute) →
//                waiting sequences (prefix-cache lookup, then CanAllocate/Allocate; short
//                of a slot or of blocks, a paused running sequence is preempted); one
//                whose next prompt block a running sequence is about to compute waits for it
//                (32 requests with one system prompt compute it once, not 32 times) →
//                drafts for decoding sequences, chosen by the DraftPlanner (router/spec/), given
//                blocks here (never by preempting)
//   Postprocess(result): advance num_computed, cache full blocks, append sampled tokens,
//                finish on a stop token or a length limit; a draft's rejected tokens give their
//                blocks back, and the planner learns what was kept.
//
// Thread-compatible: one loop drives it.
#ifndef PAGODA_ROUTER_CORE_SCHEDULER_H_
#define PAGODA_ROUTER_CORE_SCHEDULER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/step.h"
#include "router/core/adapter_slots.h"
#include "router/core/kv_cache_manager.h"
#include "router/core/sequence.h"
#include "router/core/sequence_update.h"
#include "router/core/step_budget.h"
#include "router/core/step_record.h"
#include "router/spec/draft_planner.h"

namespace pagoda {

// How a sequence gets KV blocks. kOnDemand (paged, the default): as its tokens arrive.
// kMaxLen: all it could ever need (prompt + max_tokens) at admission, like a contiguous
// allocator; kept as the baseline the paged one is measured against.
enum class KvReservation { kOnDemand, kMaxLen };

struct SchedulerOptions {
  KvReservation kv_reservation = KvReservation::kOnDemand;
  bool enable_prefix_caching = true;  // off: every prompt is computed in full
  int max_num_batched_tokens = 2048;  // tokens per step (the chunked-prefill budget)
  int max_num_seqs = 256;             // sequences per step
  // Rows of logits (or hidden states) per step: a sample, a prompt log probability and an
  // embedding's pooled row each take one (the worker's buffer holds its max_num_seqs).
  // 0: max_num_seqs.
  int max_logit_rows = 0;
  int max_model_len = 0;  // prompt + output tokens per sequence
  int num_blocks = 0;     // the worker's pool
  int block_size = 16;
  // Distinct LoRA adapters among the running sequences at most (the worker's --max-loras):
  // every running sequence may be in a step, and the worker refuses a step over it.
  int max_loras = 0;
  // Speculative decoding (router/spec/draft_planner.h): null proposer = off. The planner
  // chooses the drafts; the scheduler gives them blocks, and a draft never preempts anything.
  DraftPlannerOptions drafts;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);

  // INVALID_ARGUMENT when a sequence of this size could never run here.
  absl::Status CheckFits(int num_prompt_tokens, int max_tokens) const;
  // Queues a sequence (status waiting), last or first. Its forks (num_pending_forks) get ids
  // `id + 1 ...`.
  void Add(std::unique_ptr<Sequence> seq, bool front = false);
  // Finishes a sequence with kAbort wherever it is; its blocks are freed at once.
  void Abort(int64_t seq_id);

  StepCommand Schedule();
  // REQUIRES: `result` answers the last Schedule().
  std::vector<SequenceUpdate> Postprocess(const StepResult& result);

  // Whether a step would do anything: some sequence runs or waits and is not paused.
  bool has_work() const;
  bool has_pending_finishes() const { return !finished_on_worker_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  // Of the waiting sequences, those paused now (preempted while their client was not reading).
  int num_waiting_paused() const {
    return static_cast<int>(std::count_if(waiting_.begin(), waiting_.end(),
                                          [](const Sequence* s) { return s->is_paused(); }));
  }
  // Of the waiting sequences, those waiting after a preemption and not paused (they ask for
  // blocks this worker lacks).
  int num_waiting_preempted() const {
    return static_cast<int>(std::count_if(waiting_.begin(), waiting_.end(), [](const Sequence* s) {
      return s->preempted && !s->is_paused();
    }));
  }
  // The LoRA adapters of the running and of the waiting sequences, sorted, each once.
  std::vector<std::string> running_adapters() const { return AdapterNames(running_); }
  std::vector<std::string> waiting_adapters() const { return AdapterNames(waiting_); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Tokens computed again that a sequence had computed before (after a preemption, a failover
  // or a move without its K/V).
  int64_t num_recomputed_tokens() const { return num_recomputed_tokens_; }
  // Speculative decoding's policy: the Engine feeds it the worker's step times.
  const DraftPlanner& drafts() const { return drafts_; }
  DraftPlanner& mutable_drafts() { return drafts_; }
  const SpecDecodeStats& spec_stats() const { return drafts_.stats(); }
  // Of those, the paused sequences preempted to admit a waiting one.
  int64_t num_paused_preemptions() const { return num_paused_preemptions_; }
  // Over the running sequences: KV slots holding tokens, and slots their block tables reserve
  // (blocks x block size; a block shared by two sequences counts for each). used / reserved
  // is the KV utilization: ~1 when paged, low when reserved for the longest possible output.
  struct KvSlots {
    int64_t used = 0, reserved = 0;
  };
  KvSlots kv_slots() const;
  const KVCacheManager& kv() const { return kv_; }
  KVCacheManager& mutable_kv() { return kv_; }  // blocks held for transfers (issue 28)

  // KV transfers between workers (issue 28).
  // Whether a running (or, with `waiting_too`, waiting) sequence that is not paused is about
  // to compute block `index` of a prefix whose chained hash there is `hash` (so a sequence or
  // a peer that wants it waits for it).
  bool IsComputingBlock(int index, uint64_t hash, bool waiting_too);
  // A running sequence leaving with its K/V: the blocks that hold its computed tokens, held.
  struct Detached {
    int64_t request_id = 0;
    int seq_index = 0;
    std::vector<int> tokens;
    int num_computed = 0;
    std::vector<int> blocks;
    bool preempted = false;  // it was waiting after a preemption (DetachPreempted)
  };
  // Takes every running sequence that computed a token and forks nothing more out of the
  // scheduler (no update: it goes on elsewhere), holding its blocks for a pull.
  std::vector<Detached> DetachRunning();
  // Takes waiting sequences preempted here (not paused, forking nothing more) out of the
  // scheduler, newest preemption first, while the blocks they need to go on, their tokens' and
  // one more, sum to at most `max_blocks`. Each holds the leading full blocks it had computed
  // that are still cached (maybe none).
  std::vector<Detached> DetachPreempted(int max_blocks);
  // The sequence of `seq_id`, or null for an unknown (finished, aborted) id.
  const Sequence* sequence(int64_t seq_id) const;
  const SchedulerOptions& options() const { return options_; }

 private:
  void ForkDueSequences(std::vector<SequenceUpdate>* forks);
  void Preempt(Sequence* seq);
  // Preempts the newest running sequence that is paused this step (its client is not
  // reading; it was not scheduled) to make room for a waiting one. False when none is.
  bool PreemptPaused();
  // The chained hashes of seq's first `num_blocks` blocks, hashed once per sequence.
  // REQUIRES: those blocks are full.
  std::span<const uint64_t> BlockHashes(Sequence* seq, int num_blocks);
  // Whether a running sequence that is not paused will compute the block after `seq`'s
  // cached `num_cached_blocks`, so waiting for it turns that block into a cache hit.
  bool NextBlockIsBeingComputed(Sequence* seq, int num_cached_blocks);
  void Finish(Sequence* seq, FinishReason reason);
  // Its pulled tail block (Sequence::pulled_tail) goes with `hit` when the hit covers
  // exactly the full blocks before it; otherwise (or with `use` false) it is released.
  // Returns the block to take, or -1.
  int TakePulledTail(Sequence* seq, const PrefixHit& hit, bool use);
  // Adds seq's work to the command (StepRecord::Emit) and counts the tokens it computes again.
  void Emit(Sequence* seq, int num_new_tokens, int first_changed_block, StepCommand* cmd);
  // Speculative decoding: the sequences of this step that may get a draft go to the planner,
  // which gives them one where it pays and the step's tokens and logit rows allow it.
  void AddDrafts(const StepBudget& budget, StepCommand* cmd);
  // Appends `draft` to step entry i's sequence and the command, with the blocks it needs;
  // false when those cannot grow without preempting.
  bool CommitDraft(size_t i, std::span<const int> draft, StepCommand* cmd);
  // The step kept `num_kept` of seq's `num_draft` draft tokens: the planner learns from it, and
  // the blocks past seq's computed tokens are freed.
  void SettleDraft(Sequence* seq, int num_draft, int num_kept);

  const SchedulerOptions options_;
  KVCacheManager kv_;
  absl::flat_hash_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;           // admission order; the last is preempted first
  std::vector<int64_t> finished_on_worker_;  // for the next command's finished_ids
  StepRecord step_;                          // the step in flight: what Schedule() sent, in order
  std::vector<SequenceUpdate> pending_fork_updates_;
  int64_t next_step_id_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_paused_preemptions_ = 0;
  int64_t num_recomputed_tokens_ = 0;
  DraftPlanner drafts_;
  std::vector<DraftSlot> draft_slots_;  // scratch for AddDrafts
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_SCHEDULER_H_
