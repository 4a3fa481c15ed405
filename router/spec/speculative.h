// Speculative decoding, router side: the router, which holds every sequence's tokens, guesses
// the tokens that follow (a draft) and schedules them with the sequence's next token; the
// worker verifies the whole draft in that one pass over the weights (ScheduledSequence::
// num_draft_tokens) and keeps the longest prefix it would have sampled itself. A step that
// reads the weights for one token reads them for six at nearly the same cost, so on a CPU a
// draft that is often right is close to free tokens.
//
// Drafts are point guesses (no draft model's distribution), so verification is sampling as
// without a draft: greedy and seeded outputs are the same tokens with speculation on or off.
#ifndef PAGODA_ROUTER_SPEC_SPECULATIVE_H_
#define PAGODA_ROUTER_SPEC_SPECULATIVE_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "router/spec/suffix_index.h"

namespace pagoda {

enum class SpeculativeMethod {
  kOff,
  kNgram,   // prompt lookup: the sequence's own prompt and output
  kSuffix,  // the recent outputs of all requests where they match, else as kNgram of the model
};

absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(std::string_view name);
const char* SpeculativeMethodName(SpeculativeMethod method);

// The most draft tokens a sequence gets per step.
inline constexpr int kMaxDraftTokens = 32;

struct SpeculativeOptions {
  SpeculativeMethod method = SpeculativeMethod::kOff;
  int num_speculative_tokens = 8;  // draft tokens per sequence per step, at most
  // Drafts go where they pay for their measured cost (the worker's step times; see
  // router/spec/draft_planner.h). Until those are measured, only while a step has fewer query
  // tokens than this: below it a step costs about what one token costs where the weights'
  // read dominates.
  int max_step_tokens = 16;
  // kSuffix: the index of recent outputs, shared by the engines of one model (the Cluster
  // makes it). Null: each engine makes its own.
  std::shared_ptr<SuffixIndex> suffix_index;
};

// Proposes drafts. Called by one scheduler's thread (one per worker); what proposers of several
// workers share (the suffix index) is thread-safe.
class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Appends to *draft up to k tokens likely to follow `tokens` (a sequence's prompt and output);
  // returns how many.
  virtual int Propose(std::span<const int> tokens, int k, std::vector<int>* draft) = 0;
  // A sequence ended with these tokens (its prompt's first num_prompt_tokens): its output may
  // draft for other requests.
  virtual void Finished(std::span<const int> /*tokens*/, int /*num_prompt_tokens*/) {}
};

// INVALID_ARGUMENT naming the flag for values out of range.
absl::Status ValidateSpeculativeOptions(const SpeculativeOptions& options);

// The index of recent outputs --speculative=suffix drafts from.
std::shared_ptr<SuffixIndex> MakeSuffixIndex();

// Null for kOff.
std::unique_ptr<DraftProposer> MakeDraftProposer(const SpeculativeOptions& options);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_SPECULATIVE_H_
