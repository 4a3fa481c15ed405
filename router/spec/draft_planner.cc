#include "router/spec/draft_planner.h"

#include <algorithm>
#include <cmath>

namespace pagoda {
namespace {

// A probe that is never kept costs its step b seconds (one more token) and gains nothing; one
// every P steps per sequence costs the step's throughput f / P, f = N·b / t(Q) being what a
// token costs at the margin against what it costs on average.
constexpr double kMaxProbeLoss = 0.005;

// Keys the attention of n query tokens from position `first` reads.
double Keys(int first, int n) { return n * (first + 1.0) + n * (n - 1.0) / 2; }

// A step so far: q query tokens reading `keys` keys, expected to yield n tokens.
struct StepSize {
  int q = 0;
  double keys = 0;
  double n = 0;
};

// The k in [0, k_max] that maximizes the expected tokens per second of `step` when one of its
// sequences (with `acceptance`, its draft's first token at position `first`) drafts k.
int BestDraft(const AcceptanceStats& acceptance, const StepTimeModel& time, const StepSize& step,
              int first, int k_max) {
  int best_k = 0;
  double best = step.n / time.Seconds(step.q, step.keys);
  double p = 1, expected = 0;
  for (int k = 1; k <= k_max; ++k) {
    p *= acceptance.rate(k - 1);
    expected += p;
    const double rate = (step.n + expected) / time.Seconds(step.q + k, step.keys + Keys(first, k));
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

// Steps a sequence should go without a draft between probes (see kMaxProbeLoss).
int ProbeInterval(const StepTimeModel& time, const StepSize& step, int first) {
  const double t = time.Seconds(step.q, step.keys);
  const double margin = time.Seconds(step.q + 1, step.keys + Keys(first, 1)) - t;
  return static_cast<int>(std::min(std::ceil(step.n * margin / t / kMaxProbeLoss), 1e6));
}

double ExpectedKept(const AcceptanceStats& acceptance, int k) {
  double p = 1, expected = 0;
  for (int j = 0; j < k; ++j) expected += p *= acceptance.rate(j);
  return expected;
}

}  // namespace

DraftPlanner::DraftPlanner(const DraftPlannerOptions& options) : options_(options) {}

void DraftPlanner::RecordStepTime(const StepCommand& step, double forward_seconds) {
  // Only steps that decode (each sequence one token and its draft) are fitted: the sizes drafts
  // choose between are those, and one prefill chunk of 96 tokens, far from them, would set the
  // slope alone (and its tokens, computed together, cost less each than a decode's).
  if (step.scheduled.empty()) return;  // a step that only waited for KV transfers
  int q = 0;
  double keys = 0;
  for (const ScheduledSequence& s : step.scheduled) {
    const int n = static_cast<int>(s.token_ids.size());
    if (!s.sample || n - s.num_draft_tokens != 1) return;
    q += n;
    keys += Keys(s.num_computed_tokens, n);
  }
  step_time_.Record(q, keys, forward_seconds);
}

int DraftPlanner::MaxDraft(const DraftSlot& slot, int budget, int logit_budget) const {
  return std::max(
      0, std::min({options_.num_speculative_tokens, budget, logit_budget, slot.max_tokens}));
}

void DraftPlanner::Plan(std::span<const ScheduledSequence> step, std::span<const DraftSlot> slots,
                        int budget, int logit_budget, Commit commit) {
  StepSize size;
  for (const ScheduledSequence& s : step) {
    const int n = static_cast<int>(s.token_ids.size());
    size.q += n;
    size.keys += Keys(s.num_computed_tokens, n);
    size.n += s.sample ? 1 : 0;
  }
  if (!step_time_.ready()) {
    PlanWhileSmall(size.q, slots, budget, logit_budget, commit);
    return;
  }
  for (size_t i = 0; i < slots.size() && budget > 0 && logit_budget > 0; ++i) {
    const DraftSlot& slot = slots[i];
    const int k_max = MaxDraft(slot, budget, logit_budget);
    if (k_max == 0) continue;
    AcceptanceStats& acceptance = *slot.acceptance;
    // A sequence none of whose drafts was verified yet is judged by this worker's recent ones.
    const AcceptanceStats& rates = acceptance.num_drafts() > 0 ? acceptance : worker_acceptance_;
    const int first = slot.first_position;
    int k = BestDraft(rates, step_time_, size, first, k_max);
    const bool probe = k == 0 && acceptance.ProbeDue(ProbeInterval(step_time_, size, first));
    if (probe) k = 1;
    if (k == 0) {
      acceptance.Record(0, 0);  // (counts toward its next probe)
      continue;
    }
    draft_.clear();
    int n = std::min(options_.proposer->Propose(slot.tokens, k, &draft_), k);
    // A shorter draft than asked for may not pay (its cost per step is the same).
    if (!probe && n < k) n = BestDraft(rates, step_time_, size, first, n);
    if (n <= 0 || !commit(slot, std::span<const int>(draft_).first(n))) continue;
    size.q += n;
    size.keys += Keys(first, n);
    size.n += ExpectedKept(rates, n);
    budget -= n;
    logit_budget -= n;
  }
}

void DraftPlanner::PlanWhileSmall(int step_tokens, std::span<const DraftSlot> slots, int budget,
                                  int logit_budget, Commit commit) {
  // Past max_step_tokens the step is likely compute-bound: a draft token would cost what a token
  // of another sequence costs, and pays only when it is kept. Probes still go there: they give
  // the step time the spread of sizes its fit waits for.
  int room = std::min(options_.max_step_tokens - step_tokens, budget);
  for (size_t i = 0; i < slots.size() && logit_budget > 0 && budget > 0; ++i) {
    const DraftSlot& slot = slots[i];
    const int k_max = MaxDraft(slot, budget, logit_budget);
    if (k_max == 0) continue;
    AcceptanceStats& acceptance = *slot.acceptance;
    const int k = room > 0
                      ? std::min({acceptance.ChooseK(options_.num_speculative_tokens), k_max, room})
                      : (acceptance.ProbeDue(0) ? 1 : 0);
    if (k == 0) {
      acceptance.Record(0, 0);  // (counts toward its next probe)
      continue;
    }
    draft_.clear();
    const int n = std::min(options_.proposer->Propose(slot.tokens, k, &draft_), k);
    if (n <= 0 || !commit(slot, std::span<const int>(draft_).first(n))) continue;
    room -= n;
    budget -= n;
    logit_budget -= n;
  }
}

void DraftPlanner::Settle(AcceptanceStats* acceptance, int num_draft, int num_kept) {
  ++stats_.num_drafts;
  stats_.num_draft_tokens += num_draft;
  stats_.num_accepted_tokens += num_kept;
  if (static_cast<int>(stats_.accepted_per_position.size()) < num_draft) {
    stats_.accepted_per_position.resize(num_draft, 0);
  }
  for (int i = 0; i < num_kept; ++i) ++stats_.accepted_per_position[i];
  // Under the cost rule a sequence's first draft was chosen by the worker's rates: its own
  // start from them.
  if (acceptance->num_drafts() == 0 && step_time_.ready()) {
    acceptance->CopyRates(worker_acceptance_);
  }
  acceptance->Record(num_draft, num_kept);
  worker_acceptance_.Record(num_draft, num_kept);
}

void DraftPlanner::Finished(std::span<const int> tokens, int num_prompt_tokens) {
  if (options_.proposer != nullptr) options_.proposer->Finished(tokens, num_prompt_tokens);
}

}  // namespace pagoda
