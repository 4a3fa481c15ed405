#include "router/spec/step_time.h"

#include <cmath>
#include <utility>

#include "glog/logging.h"

namespace pagoda {
namespace {

// The fit waits for this much weight (steps) and for this spread of q around its mean: the sum
// of the weighted squared deviations, 1 / the slope's variance in units of the steps' noise
// (16: the slope in q is known to a quarter of a step's noise per token).
constexpr double kMinWeight = 8;
constexpr double kMinSpread = 16;
constexpr double kKeysUnit = 1000;

// Solves g·x = h for the n×n top-left of g (Gaussian elimination with partial pivoting).
// False when it is singular to working precision.
bool Solve(std::array<std::array<double, 3>, 3> g, std::array<double, 3> h, int n,
           std::array<double, 3>* x) {
  std::array<double, 3> scale;  // a column collinear with earlier ones leaves ~0 of this
  for (int i = 0; i < n; ++i) scale[i] = std::abs(g[i][i]);
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(g[r][col]) > std::abs(g[pivot][col])) pivot = r;
    }
    if (!(std::abs(g[pivot][col]) > 1e-9 * scale[col])) return false;
    std::swap(g[col], g[pivot]);
    std::swap(h[col], h[pivot]);
    for (int r = col + 1; r < n; ++r) {
      const double f = g[r][col] / g[col][col];
      for (int j = col; j < n; ++j) g[r][j] -= f * g[col][j];
      h[r] -= f * h[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double v = h[r];
    for (int j = r + 1; j < n; ++j) v -= g[r][j] * (*x)[j];
    (*x)[r] = v / g[r][r];
  }
  return true;
}

}  // namespace

StepTimeModel::StepTimeModel(double decay) : decay_(decay) {
  CHECK(decay > 0 && decay < 1) << "StepTimeModel decay=" << decay;
}

void StepTimeModel::Record(int num_query_tokens, double num_keys, double seconds) {
  if (num_query_tokens < 1 || !(num_keys >= 0) || !std::isfinite(num_keys) ||
      !std::isfinite(seconds) || seconds <= 0) {
    return;
  }
  const std::array<double, 3> x = {1, static_cast<double>(num_query_tokens), num_keys / kKeysUnit};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) xx_[i][j] = xx_[i][j] * decay_ + x[i] * x[j];
    xt_[i] = xt_[i] * decay_ + x[i] * seconds;
  }
  tt_ = tt_ * decay_ + seconds * seconds;
  const double w = xx_[0][0];
  const double spread = xx_[1][1] - xx_[0][1] * xx_[0][1] / w;
  if (w < kMinWeight || spread < kMinSpread) return;  // the last fit holds
  Fit();
}

void StepTimeModel::Fit() {
  // Least squares with coefficients >= 0: the best of the fits on each subset of (a, b, c)
  // (the others 0) whose coefficients are all >= 0. Seven 3×3 solves at most.
  double best_sse = INFINITY;
  std::array<double, 3> best{};
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], n = 0;
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i)) idx[n++] = i;
    }
    std::array<std::array<double, 3>, 3> g{};
    std::array<double, 3> h{}, x{};
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < n; ++j) g[r][j] = xx_[idx[r]][idx[j]];
      h[r] = xt_[idx[r]];
    }
    if (!Solve(g, h, n, &x)) continue;
    bool feasible = true;
    double sse = tt_;  // at the least-squares solution: Σt² − coefᵀ·Σx·t
    for (int r = 0; r < n; ++r) {
      feasible = feasible && x[r] >= 0 && std::isfinite(x[r]);
      sse -= x[r] * h[r];
    }
    if (!feasible || !(sse < best_sse)) continue;
    best_sse = sse;
    best = {};
    for (int r = 0; r < n; ++r) best[idx[r]] = x[r];
  }
  best[2] /= kKeysUnit;
  // A step of one token reading one key must cost something (all steps took > 0 seconds).
  if (!(best[0] + best[1] + best[2] > 0) || !std::isfinite(best[0] + best[1] + best[2])) return;
  coef_ = best;
  ready_ = true;
}

}  // namespace pagoda
