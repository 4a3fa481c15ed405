// Structured output on the router: a request's grammar (GBNF, JSON Schema, regex, choice) and
// its token mask over the model's vocabulary, shared by the request's sequences; each
// sequence keeps its own GrammarMatcher (Sequence::matcher), advanced by the bytes of every
// token it samples. The router holds the state because it has the tokenizer: before a step it
// sends the worker the tokens the grammar allows (ScheduledSequence::allowed_*), after it
// advances the matcher. A sequence preempted or moved to another worker keeps its output
// tokens, and its matcher is their replay, so it never drifts from them.
#ifndef PAGODA_ROUTER_CORE_CONSTRAINT_H_
#define PAGODA_ROUTER_CORE_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/grammar/token_masker.h"

namespace pagoda {

struct Constraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<TokenMasker> masker;  // thread-safe; caches walks across requests
};

// Sets `out`'s constraint to the tokens `matcher` allows next, in the smaller wire form: the
// ids when fewer than vocab / 32 (4 bytes each against vocab / 8), else the bitmask. `mask`
// is scratch. An error when the matcher passed its limits (the sequence cannot go on).
absl::Status FillAllowed(TokenMasker& masker, GrammarMatcher& matcher, std::vector<uint64_t>* mask,
                         std::vector<int>* ids, std::vector<uint64_t>* words);

// FillAllowed for sequence `seq_id`'s next sample. False (logged) when the matcher passed its
// limits; the set is then one token, so that the worker still gets a valid step.
bool FillStepAllowed(const Constraint& constraint, GrammarMatcher& matcher, int64_t seq_id,
                     std::vector<uint64_t>* mask, std::vector<int>* ids,
                     std::vector<uint64_t>* words);

enum class GrammarEnd { kNo, kStopToken, kComplete };

// Advances sequence `seq_id`'s `matcher` by `token`, and says whether the sequence ends there:
// on a stop token (EOS, allowed only once the grammar is complete; or a token the grammar
// refuses, from a worker that ignored the mask: it is not output), or after it (kComplete: the
// grammar is complete and accepts nothing more; the token is text).
GrammarEnd AdvanceGrammar(const Constraint& constraint, GrammarMatcher& matcher, int token,
                          int64_t seq_id);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_CONSTRAINT_H_
