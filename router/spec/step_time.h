// What a worker's step costs as a function of its query tokens, measured online: a least-squares
// line t(q) = a + b·q through recent steps (q query tokens, t seconds), older steps weighted
// down by `decay` per step. On a CPU `a` is the pass over the weights (every step reads them
// all) and `b` the compute of one more token; speculative decoding asks whether a step with k
// more draft tokens yields more tokens per second (router/scheduler_drafts.cc).
//
//   1.1B, memory-bound:   a ≈ 75 ms, b ≈ 2–9 ms   a draft token costs a few % of a step
//   stories260K, cached:  a ≈ b                    a draft token costs nearly a step
//
// The line is fitted only once the steps recorded span more than one size (a draft, a probe, a
// sequence finishing); until then ready() is false. Later, while the recent steps all have one
// size (no drafts) the slope is unknowable from them, so the last fit holds. The fit keeps
// a, b >= 0 (a line through the data would say a step of 0 tokens costs less than nothing
// when the steps measured are compute-bound).
//
// Thread-compatible: one per scheduler, fed after each step.
#ifndef PAGODA_ROUTER_SPEC_STEP_TIME_H_
#define PAGODA_ROUTER_SPEC_STEP_TIME_H_

namespace pagoda {

class StepTimeModel {
 public:
  // REQUIRES: 0 < decay < 1. The steps' weights add up to at most 1 / (1 - decay): 0.995 fits
  // about the last 200 steps.
  explicit StepTimeModel(double decay = 0.995);

  // A step of `num_query_tokens` took `seconds` (a worker's report: steps with q < 1 or a time
  // that is not a positive finite number are ignored).
  void Record(int num_query_tokens, double seconds);

  // Whether a() and b() come from a fit.
  bool ready() const { return ready_; }
  double a() const { return a_; }
  double b() const { return b_; }
  // a + b·q; positive once ready().
  double Seconds(int num_query_tokens) const { return a_ + b_ * num_query_tokens; }

 private:
  double decay_;
  // Decayed sums over the steps: weight, q, q², t, q·t.
  double w_ = 0, q_ = 0, qq_ = 0, t_ = 0, qt_ = 0;
  bool ready_ = false;
  double a_ = 0, b_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_STEP_TIME_H_
