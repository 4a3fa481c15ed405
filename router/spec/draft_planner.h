// Speculative decoding's policy on the router (router/spec/speculative.h): which decoding
// sequences of a step get a draft and how long, what the worker kept of them, and what a step
// costs on this worker. The Scheduler calls it at named points and keeps only the blocks:
//
//   Scheduler::Schedule()     the step is scheduled → Plan(): each draft chosen comes back
//                             through `commit`, which gives it KV blocks (or refuses: a draft
//                             never preempts)
//   Scheduler::Postprocess()  a sequence's draft was verified → Settle()
//   Engine::Step()            the worker's forward time → RecordStepTime()
//   Scheduler::Finish()       a sequence ended → Finished() (its output may draft for others)
//
// The rule. A step of Q query tokens that yields N tokens takes t(Q) seconds on its worker
// (StepTimeModel: a + b·Q + c·keys, fitted to the worker's reported forward times; a draft
// token costs b + c·(its keys)). A draft of k tokens for one of its sequences adds E_k =
// p_1 + ... + p_k expected tokens, p_j being the probability that its j-th draft token is kept
// (AcceptanceStats::expected(j), from what the worker kept of that sequence's earlier drafts),
// and it pays when
//
//   (N + E_k) / t(Q + k)  >  N / t(Q)
//
// i.e. when the step's expected tokens per second grow. Each sequence in turn gets the k
// (0..max) that maximizes that rate, and Q and N grow by its k and E_k before the next one.
// Where the weights' read dominates (a large model, few sequences) a is large and drafts pay
// with modest acceptance; where the model sits in cache or the step is already compute-bound
// (many sequences) a draft token costs about what a sequence's token costs and pays only when
// it is nearly always kept.
//
// A sequence that has had no draft verified yet is judged by the acceptance of this worker's
// recent drafts, and its own rates start from them (AcceptanceStats' initial rate is
// optimistic, which a draft that costs nearly a step cannot afford). One that gets no draft
// probes with k = 1 now and then, so its acceptance keeps being measured: after
// AcceptanceOptions::probe_every (16) steps without one, or more where probes cost more, so that
// probes that all miss cost at most kMaxProbeLoss of the throughput. Until the worker's step
// times span more than one step size (StepTimeModel::ready), drafts are added as before the fit
// existed: while the step has fewer than max_step_tokens query tokens (and probes past that,
// which give the fit its spread).
//
// Thread-compatible: one per scheduler, called by the loop that drives it. No lock, no clock:
// the times are the worker's reports.
#ifndef PAGODA_ROUTER_SPEC_DRAFT_PLANNER_H_
#define PAGODA_ROUTER_SPEC_DRAFT_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/step.h"
#include "router/spec/acceptance.h"
#include "router/spec/speculative.h"
#include "router/spec/step_time.h"

namespace pagoda {

struct DraftPlannerOptions {
  DraftProposer* proposer = nullptr;  // Not owned. Null: no drafts (enabled() is false).
  int num_speculative_tokens = 0;     // draft tokens per sequence and step, at most
  // Until the step time is fitted: drafts while the step has fewer query tokens than this.
  int max_step_tokens = 0;
};

// Speculative decoding's counts (vLLM's spec_decode metrics).
struct SpecDecodeStats {
  int64_t num_drafts = 0;                      // sequence-steps that carried a draft
  int64_t num_draft_tokens = 0;                // tokens drafted
  int64_t num_accepted_tokens = 0;             // draft tokens the worker kept
  std::vector<int64_t> accepted_per_position;  // [i]: drafts whose token i was kept
};

// A sequence of the step that may get a draft: it decodes one token, and its draft (every token
// of which may be kept, with one more after it) follows its computed tokens.
struct DraftSlot {
  size_t index = 0;             // the caller's (Plan hands the slot back to `commit`)
  std::span<const int> tokens;  // its prompt and output, which the draft follows
  int first_position = 0;       // the draft's first token's position
  int max_tokens = 0;           // the most draft tokens its limits leave (max_tokens, length)
  AcceptanceStats* acceptance = nullptr;  // its own. Not owned.
};

class DraftPlanner {
 public:
  // Gives `slot` the draft: false when it cannot have it (its blocks cannot grow without
  // preempting), and the step is then as if it had not been asked.
  using Commit = absl::FunctionRef<bool(const DraftSlot& slot, std::span<const int> draft)>;

  explicit DraftPlanner(const DraftPlannerOptions& options);

  bool enabled() const { return options_.proposer != nullptr; }

  // Drafts for `slots`, in order, where they pay (the rule above), within the `budget` query
  // tokens and `logit_budget` logit rows the step has left. `step` is the step as scheduled
  // (read before the first commit). REQUIRES: enabled().
  void Plan(std::span<const ScheduledSequence> step, std::span<const DraftSlot> slots, int budget,
            int logit_budget, Commit commit);
  // The worker kept `num_kept` of a sequence's `num_draft` draft tokens: counted, and both the
  // sequence's `acceptance` and this worker's learn from it.
  void Settle(AcceptanceStats* acceptance, int num_draft, int num_kept);
  // The worker's forward time for `step`: what a decoding step of its size costs there. Only
  // steps that decode (each sequence one token and its draft) are fitted.
  void RecordStepTime(const StepCommand& step, double forward_seconds);
  // A sequence ended with these tokens (its prompt's first num_prompt_tokens): its output may
  // draft for other requests (the suffix index). Nothing when not enabled().
  void Finished(std::span<const int> tokens, int num_prompt_tokens);

  const SpecDecodeStats& stats() const { return stats_; }
  const StepTimeModel& step_time() const { return step_time_; }

 private:
  // Plan before the step time is known: drafts while the step is small.
  void PlanWhileSmall(int step_tokens, std::span<const DraftSlot> slots, int budget,
                      int logit_budget, Commit commit);
  // The most draft tokens `slot` may get now (0: none).
  int MaxDraft(const DraftSlot& slot, int budget, int logit_budget) const;

  const DraftPlannerOptions options_;
  SpecDecodeStats stats_;
  StepTimeModel step_time_;
  // Acceptance by position over all the drafts verified here (slowly moving): the rates of a
  // sequence that has had none verified yet.
  AcceptanceStats worker_acceptance_{{.alpha = 0.05f}};
  std::vector<int> draft_;  // scratch for Plan
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_DRAFT_PLANNER_H_
