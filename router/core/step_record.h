// One step as the Scheduler sent it, sequence by sequence, and the worker's answer read back in
// the same order. Emit writes a sequence's part of the StepCommand (its new-sequence record the
// first time the worker sees it, its tokens, the blocks past those the worker kept, its
// grammar's allowed tokens) and records it as an Entry; a draft grows the last entries
// (Entry::num_draft); Reader walks a StepResult entry by entry, skipping the reports of
// sequences aborted meanwhile. The worker's answer was checked against the command before
// (step_check.h), so a report missing here is a bug, not bad input.
// Thread-compatible: the Scheduler's loop drives it.
#ifndef PAGODA_ROUTER_CORE_STEP_RECORD_H_
#define PAGODA_ROUTER_CORE_STEP_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/step.h"
#include "router/core/sequence.h"

namespace pagoda {

class StepRecord {
 public:
  struct Entry {
    Sequence* seq;
    int num_tokens;
    bool sample;
    bool prompt_logprobs;  // the worker reports some for this chunk
    int num_draft = 0;     // of num_tokens, draft tokens (the worker keeps some of them)
  };

  // Adds seq's next `num_new_tokens` (from its computed ones) to `cmd` and records them. `table`
  // is seq's block table now; the worker keeps the blocks before `first_changed_block` that it
  // was sent before. A constrained sequence whose grammar allows nothing is marked
  // constraint_failed (its sample is dropped and it ends).
  void Emit(Sequence* seq, int num_new_tokens, int first_changed_block,
            const std::vector<int>& table, StepCommand* cmd);

  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // Drops seq's entry (it was aborted or preempted before the step ran).
  void Forget(const Sequence* seq);
  void Clear() { entries_.clear(); }

  // A StepResult read in the order of the entries.
  class Reader {
   public:
    explicit Reader(const StepResult& result) : result_(result) {}
    // The prompt log probabilities of `entry`'s chunk. REQUIRES: entry.prompt_logprobs.
    const PromptLogprobs& PromptLogprobsOf(const Entry& entry);
    // What `entry` sampled: one token, or a draft's kept tokens and the one after them.
    // REQUIRES: entry.sample.
    std::span<const SampledToken> SamplesOf(const Entry& entry);
    // The embedding of an embedding sequence whose prompt is now computed.
    const std::vector<float>& EmbeddingOf(const Sequence& seq);

   private:
    const StepResult& result_;
    size_t next_sample_ = 0, next_prompt_ = 0, next_embedding_ = 0;
  };

 private:
  std::vector<Entry> entries_;
  std::vector<uint64_t> mask_;  // a constrained sequence's mask, before its wire form
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STEP_RECORD_H_
