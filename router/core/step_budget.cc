#include "router/core/step_budget.h"

#include <algorithm>

namespace pagoda {

int StepBudget::LogitRows(const Sequence& seq, int begin, int end) {
  if (seq.needs_every_row()) return end - begin;  // prompt rows then the sampled one
  const bool last = end == seq.num_tokens();
  return last && (seq.pooling == Pooling::kLast || seq.pooling == Pooling::kNone) ? 1 : 0;
}

int StepBudget::Fit(const Sequence& seq, int begin, int n) const {
  n = std::min(n, tokens_);
  if (seq.needs_every_row()) return std::min(n, logit_rows_);
  return LogitRows(seq, begin, begin + n) <= logit_rows_ ? n : 0;
}

void StepBudget::Take(const Sequence& seq, int begin, int end) {
  tokens_ -= end - begin;
  logit_rows_ -= LogitRows(seq, begin, end);
}

}  // namespace pagoda
