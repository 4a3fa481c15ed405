// What a worker's step costs, measured online: a least-squares fit
//
//   t = a + b·q + c·k
//
// through recent steps of q query tokens whose attention reads k keys in all (a query token at
// position i reads i + 1), older steps weighted down by `decay` per step. On a CPU `a` is the
// pass over the weights (every step reads them all), `b` a token's share of the matrix
// products and `c` one key's share of attention. Speculative decoding asks whether a step with
// more draft tokens yields more tokens per second (router/spec/draft_planner.h): a draft token
// costs b + c·(its keys).
//
//   1.1B random weights, memory-bound:  a ≈ 75 ms, b ≈ 2–9 ms   a draft token costs a few %
//   stories260K (1 MiB, in cache):      a, b small, attention   a draft token costs what a
//                                       dominates at 32 streams  sequence's token costs
//
// The keys term matters where the model is small: at 32 streams the keys grow with every
// step, and without it the step's growth would count as fixed cost (a), which drafts seem to
// save.
//
// The fit waits until the steps recorded span more than one size (a draft, a probe, a sequence
// finishing); until then ready() is false. Later, while the recent steps all have one size
// (no drafts), the slope in q is unknowable from them and the last fit holds. Coefficients are
// kept >= 0: of the fits with some of them at 0, the best one without a negative coefficient.
//
// Thread-compatible: one per scheduler, fed after each step.
#ifndef PAGODA_ROUTER_SPEC_STEP_TIME_H_
#define PAGODA_ROUTER_SPEC_STEP_TIME_H_

#include <array>

namespace pagoda {

class StepTimeModel {
 public:
  // REQUIRES: 0 < decay < 1. The steps' weights add up to at most 1 / (1 - decay): 0.995 fits
  // about the last 200 steps.
  explicit StepTimeModel(double decay = 0.995);

  // A step of `num_query_tokens` reading `num_keys` keys took `seconds` (a worker's report:
  // steps with q < 1, keys < 0 or a time that is not a positive finite number are ignored).
  void Record(int num_query_tokens, double num_keys, double seconds);

  // Whether a(), b() and c() come from a fit.
  bool ready() const { return ready_; }
  double a() const { return coef_[0]; }
  double b() const { return coef_[1]; }
  double c() const { return coef_[2]; }
  // a + b·q + c·keys; positive once ready().
  double Seconds(int num_query_tokens, double num_keys) const {
    return coef_[0] + coef_[1] * num_query_tokens + coef_[2] * num_keys;
  }

 private:
  void Fit();

  double decay_;
  // Decayed sums over the steps of x·xᵀ, x·t and t² for x = (1, q, keys / 1000) (in thousands:
  // the sums stay within a few orders of magnitude of one another).
  std::array<std::array<double, 3>, 3> xx_{};
  std::array<double, 3> xt_{};
  double tt_ = 0;
  bool ready_ = false;
  std::array<double, 3> coef_{};  // a, b, c (per key, not per thousand)
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_STEP_TIME_H_
