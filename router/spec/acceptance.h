// How many draft tokens one sequence should propose next: per draft position, an exponentially
// weighted rate of acceptance given that every earlier position was accepted (vLLM reports
// acceptance by position). The product of the first k rates is the probability that the k-th
// draft token is accepted, i.e. the expected tokens it adds; a draft token is worth verifying
// while that stays >= min_expected.
//
//   rate:      0.95  0.90  0.70  0.50  ...
//   expected:  0.95  0.86  0.60  0.30  0.12     ChooseK(8) = 4 at min_expected 0.3
//
// Thread-compatible: one per sequence, used by the scheduler that owns it. ~100 bytes.
#ifndef PAGODA_ROUTER_SPEC_ACCEPTANCE_H_
#define PAGODA_ROUTER_SPEC_ACCEPTANCE_H_

#include <array>
#include <cstdint>

namespace pagoda {

struct AcceptanceOptions {
  // Weight of a new observation in a position's rate. REQUIRES: 0 < alpha <= 1.
  float alpha = 0.2f;
  // Every position's rate for a new sequence: optimistic, so a new sequence drafts at once
  // (0.9^11 >= 0.3: up to 11 tokens at the other defaults). REQUIRES: 0 <= initial_rate <= 1.
  float initial_rate = 0.9f;
  // ChooseK's threshold on the expected acceptance of the last draft position.
  float min_expected = 0.3f;
  // After this many steps in a row without a draft (Record(0, 0)), ChooseK answers at least 1,
  // so a sequence whose rates fell (a loop that ended) can find its way back. 0 = never.
  int probe_every = 16;
};

class AcceptanceStats {
 public:
  // Positions past the last share its rate.
  static constexpr int kNumPositions = 16;

  explicit AcceptanceStats(const AcceptanceOptions& options = {});

  // One verified draft: `proposed` tokens, the first `accepted` of them accepted. Positions
  // < accepted count a success, position `accepted` (if proposed) a failure, later ones
  // nothing (never reached). Record(0, 0) is a step without a draft. Values out of range are
  // clamped (they come from a worker): proposed to >= 0, accepted to [0, proposed].
  void Record(int proposed, int accepted);

  // The largest k in [0, k_max] with expected(k) >= min_expected (or 1 when it is time to
  // probe, see AcceptanceOptions::probe_every, and k_max >= 1).
  int ChooseK(int k_max) const;
  // Whether the sequence has gone max(probe_every, min_steps) steps without a draft (never when
  // probe_every is 0): a caller that weighs a draft's cost probes less often where probes cost
  // more.
  bool ProbeDue(int min_steps) const;

  // Takes `other`'s rates as its own (a sequence's first draft starts from its worker's
  // experience rather than the optimistic initial rate); counts are unchanged.
  void CopyRates(const AcceptanceStats& other) { rates_ = other.rates_; }

  // P(draft position `position` is accepted | all before it were); position >= 0.
  float rate(int position) const;
  // The product of the first k rates: P(the k-th draft token is accepted). expected(0) = 1.
  float expected(int k) const;

  int64_t num_drafts() const { return num_drafts_; }
  int64_t num_draft_tokens() const { return num_draft_tokens_; }
  int64_t num_accepted_tokens() const { return num_accepted_tokens_; }

 private:
  AcceptanceOptions options_;
  std::array<float, kNumPositions> rates_;
  int steps_without_draft_ = 0;
  int64_t num_drafts_ = 0;
  int64_t num_draft_tokens_ = 0;
  int64_t num_accepted_tokens_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_ACCEPTANCE_H_
