// The scheduler's part of speculative decoding (router/speculative.h): drafts added to a step
// that is already scheduled, and what the worker kept of them.
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
// optimistic, which a draft that costs nearly a step cannot afford). One that gets no draft probes
// with k = 1 now and then, so its acceptance keeps being measured: after
// AcceptanceOptions::probe_every (16) steps without one, or more where probes cost more, so that
// probes that all miss cost at most kMaxProbeLoss of the throughput. Until the worker's step times
// span more than one step size (StepTimeModel::ready), drafts are added as before the fit existed:
// while the step has fewer than max_speculative_step_tokens query tokens (and probes past that,
// which give the fit its spread).
#include <algorithm>
#include <cmath>

#include "router/scheduler.h"

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

void Scheduler::RecordStepTime(const StepCommand& step, double forward_seconds) {
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

int Scheduler::MaxDraft(size_t i, int budget, int logit_budget) const {
  const Scheduled& step = last_step_[i];
  const Sequence* seq = step.seq;
  // Decoding one token, unconstrained (a grammar's mask depends on the tokens before it),
  // past its first output token and its forks.
  if (!step.sample || step.num_tokens != 1 || step.prompt_logprobs || seq->matcher.has_value() ||
      seq->num_output_tokens() < 1 || seq->num_pending_forks > 0 ||
      seq->num_computed_tokens + 1 != seq->num_tokens()) {
    return 0;
  }
  // Every draft token may be kept, with one more after it: max_tokens and the model length
  // bound the draft as they bound the output.
  return std::max(0, std::min({options_.num_speculative_tokens, budget, logit_budget,
                               seq->max_tokens - seq->num_output_tokens() - 1,
                               seq->max_total_tokens - seq->num_tokens() - 1}));
}

bool Scheduler::CommitDraft(size_t i, int n, StepCommand* cmd) {
  Scheduled& step = last_step_[i];
  Sequence* seq = step.seq;
  const int begin = seq->num_computed_tokens, end = begin + 1 + n;
  if (!kv_.CanAppend(seq->id, begin, end)) return false;  // a draft never preempts
  kv_.Append(seq->id, begin, end, &cmd->block_copies);
  ScheduledSequence& out = cmd->scheduled[i];  // Emit added both in the same order
  out.token_ids.insert(out.token_ids.end(), draft_.begin(), draft_.begin() + n);
  out.num_draft_tokens = n;
  const std::vector<int>& table = kv_.block_table(seq->id);
  out.new_block_ids.assign(table.begin() + out.num_kept_blocks, table.end());
  seq->num_synced_blocks = static_cast<int>(table.size());
  step.num_tokens += n;
  step.num_draft = n;
  return true;
}

void Scheduler::AddDrafts(int budget, int logit_budget, StepCommand* cmd) {
  if (!step_time_.ready()) {
    AddDraftsWhileSmall(budget, logit_budget, cmd);
    return;
  }
  StepSize size;
  for (const ScheduledSequence& s : cmd->scheduled) {
    const int n = static_cast<int>(s.token_ids.size());
    size.q += n;
    size.keys += Keys(s.num_computed_tokens, n);
    size.n += s.sample ? 1 : 0;
  }
  for (size_t i = 0; i < last_step_.size() && budget > 0 && logit_budget > 0; ++i) {
    const int k_max = MaxDraft(i, budget, logit_budget);
    if (k_max == 0) continue;
    Sequence* seq = last_step_[i].seq;
    AcceptanceStats& acceptance = seq->acceptance;
    // A sequence none of whose drafts was verified yet is judged by this worker's recent ones.
    const AcceptanceStats& rates = acceptance.num_drafts() > 0 ? acceptance : worker_acceptance_;
    const int first = seq->num_computed_tokens + 1;  // the draft's first token's position
    int k = BestDraft(rates, step_time_, size, first, k_max);
    const bool probe = k == 0 && acceptance.ProbeDue(ProbeInterval(step_time_, size, first));
    if (probe) k = 1;
    if (k == 0) {
      acceptance.Record(0, 0);  // (counts toward its next probe)
      continue;
    }
    draft_.clear();
    int n = std::min(options_.proposer->Propose(seq->tokens, k, &draft_), k);
    // A shorter draft than asked for may not pay (its cost per step is the same).
    if (!probe && n < k) n = BestDraft(rates, step_time_, size, first, n);
    if (n <= 0 || !CommitDraft(i, n, cmd)) continue;
    size.q += n;
    size.keys += Keys(first, n);
    size.n += ExpectedKept(rates, n);
    budget -= n;
    logit_budget -= n;
  }
}

void Scheduler::AddDraftsWhileSmall(int budget, int logit_budget, StepCommand* cmd) {
  // Past max_speculative_step_tokens the step is likely compute-bound: a draft token would cost
  // what a token of another sequence costs, and pays only when it is kept. Probes still go
  // there: they give the step time the spread of sizes its fit waits for.
  int room = std::min(
      options_.max_speculative_step_tokens - (options_.max_num_batched_tokens - budget), budget);
  for (size_t i = 0; i < last_step_.size() && logit_budget > 0 && budget > 0; ++i) {
    const int k_max = MaxDraft(i, budget, logit_budget);
    if (k_max == 0) continue;
    AcceptanceStats& acceptance = last_step_[i].seq->acceptance;
    const int k = room > 0
                      ? std::min({acceptance.ChooseK(options_.num_speculative_tokens), k_max, room})
                      : (acceptance.ProbeDue(0) ? 1 : 0);
    if (k == 0) {
      acceptance.Record(0, 0);  // (counts toward its next probe)
      continue;
    }
    draft_.clear();
    const int n = std::min(options_.proposer->Propose(last_step_[i].seq->tokens, k, &draft_), k);
    if (n <= 0 || !CommitDraft(i, n, cmd)) continue;
    room -= n;
    budget -= n;
    logit_budget -= n;
  }
}

void Scheduler::SettleDraft(Sequence* seq, int num_draft, int num_kept) {
  ++spec_stats_.num_drafts;
  spec_stats_.num_draft_tokens += num_draft;
  spec_stats_.num_accepted_tokens += num_kept;
  if (static_cast<int>(spec_stats_.accepted_per_position.size()) < num_draft) {
    spec_stats_.accepted_per_position.resize(num_draft, 0);
  }
  for (int i = 0; i < num_kept; ++i) ++spec_stats_.accepted_per_position[i];
  // Under the cost rule a sequence's first draft was chosen by the worker's rates: its own
  // start from them.
  if (seq->acceptance.num_drafts() == 0 && step_time_.ready()) {
    seq->acceptance.CopyRates(worker_acceptance_);
  }
  seq->acceptance.Record(num_draft, num_kept);
  worker_acceptance_.Record(num_draft, num_kept);
  if (num_kept < num_draft) {
    kv_.Truncate(seq->id, seq->num_computed_tokens);
    seq->num_synced_blocks = std::min<int>(seq->num_synced_blocks, kv_.block_table(seq->id).size());
  }
}

}  // namespace pagoda
