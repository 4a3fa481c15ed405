// What one step may still take: tokens to compute (the chunked-prefill budget) and rows of
// logits (each a vocabulary-wide output row the worker computes and sends). The Scheduler fits
// each sequence's chunk to it, running sequences first, then waiting ones, then drafts.
#ifndef PAGODA_ROUTER_CORE_STEP_BUDGET_H_
#define PAGODA_ROUTER_CORE_STEP_BUDGET_H_

#include "router/core/sequence.h"

namespace pagoda {

class StepBudget {
 public:
  StepBudget(int tokens, int logit_rows) : tokens_(tokens), logit_rows_(logit_rows) {}

  // Logit (or hidden) rows the worker computes for seq's tokens [begin, end): every row for a
  // sequence that needs them all (prompt log probabilities, mean pooling), else one when the
  // chunk ends at its last token and it samples or pools the last row, else none.
  static int LogitRows(const Sequence& seq, int begin, int end);

  // How many of `n` tokens of seq from `begin` fit: at most the tokens left; a sequence that
  // needs every row also at most the rows left; any other all or nothing on its one row. 0 when
  // nothing fits.
  int Fit(const Sequence& seq, int begin, int n) const;
  // Spends seq's tokens [begin, end) and their rows.
  void Take(const Sequence& seq, int begin, int end);

  int tokens() const { return tokens_; }
  int logit_rows() const { return logit_rows_; }

 private:
  int tokens_;
  int logit_rows_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STEP_BUDGET_H_
