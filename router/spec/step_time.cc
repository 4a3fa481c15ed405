#include "router/spec/step_time.h"

#include <cmath>

#include "glog/logging.h"

namespace pagoda {
namespace {

// The fit waits for this much weight (steps) and for this spread of q around its mean: the sum
// of the weighted squared deviations, 1/variance of the slope in units of the steps' noise
// (4: the slope is known to half a step's noise per token).
constexpr double kMinWeight = 8;
constexpr double kMinSpread = 4;

}  // namespace

StepTimeModel::StepTimeModel(double decay) : decay_(decay) {
  CHECK(decay > 0 && decay < 1) << "StepTimeModel decay=" << decay;
}

void StepTimeModel::Record(int num_query_tokens, double seconds) {
  if (num_query_tokens < 1 || !std::isfinite(seconds) || seconds <= 0) return;
  const double q = num_query_tokens;
  w_ = w_ * decay_ + 1;
  q_ = q_ * decay_ + q;
  qq_ = qq_ * decay_ + q * q;
  t_ = t_ * decay_ + seconds;
  qt_ = qt_ * decay_ + q * seconds;
  const double spread = qq_ - q_ * q_ / w_;
  if (w_ < kMinWeight || spread < kMinSpread) return;  // the last fit holds
  double b = (qt_ - q_ * t_ / w_) / spread;
  double a = (t_ - b * q_) / w_;
  if (b < 0) {  // noise: steps cost the same whatever their size
    b = 0;
    a = t_ / w_;
  } else if (a < 0) {  // compute-bound: through the origin
    a = 0;
    b = qt_ / qq_;
  }
  if (!(a + b > 0) || !std::isfinite(a + b)) return;
  a_ = a;
  b_ = b;
  ready_ = true;
}

}  // namespace pagoda
