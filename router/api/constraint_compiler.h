// Turns a request's structured-output grammar (GBNF text) into a Constraint over the model's
// vocabulary, for every front end. The vocabulary (each token's bytes, a byte trie) is built
// once, on the first constrained request, so a router that never sees one pays nothing;
// compiled constraints are kept for the last few distinct grammars, so clients that send
// one schema again and again find its token-mask walks already cached (a cold mask costs
// milliseconds, a warm one microseconds: docs/BENCHMARKS.md §16). Thread-safe.
#ifndef PAGODA_ROUTER_API_CONSTRAINT_COMPILER_H_
#define PAGODA_ROUTER_API_CONSTRAINT_COMPILER_H_

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/model/model_config.h"
#include "lib/grammar/token_vocabulary.h"
#include "lib/text/tokenizer.h"
#include "router/core/constraint.h"

namespace pagoda {

// Grammars kept compiled, and the token-mask cache of each (TokenMaskerOptions::cache_bytes):
// at most kMaxCachedConstraints * kMaskCacheBytes of walks.
inline constexpr int kMaxCachedConstraints = 8;
inline constexpr size_t kMaskCacheBytes = size_t{16} << 20;

class ConstraintCompiler {
 public:
  // Not owned; must outlive it. `config` gives the vocabulary size (the model's, which may pad
  // the tokenizer's) and the EOS ids.
  ConstraintCompiler(const Tokenizer* tokenizer, const ModelConfig& config);

  // The constraint for `gbnf`; INVALID_ARGUMENT whose message starts with `field` when it does
  // not parse or passes GrammarLimits.
  absl::StatusOr<std::shared_ptr<const Constraint>> Compile(std::string_view gbnf,
                                                            absl::string_view field);

  // The id of the added token (Tokenizer::IsAddedToken) whose text is `text`, else -1: what a
  // tool-call grammar writes as a token terminal instead of bytes.
  int SpecialTokenId(std::string_view text) const;

  // Each token's bytes mid-text, special tokens (BOS, EOS, <unk>, <|...|>, added tokens) as ""
  // so no byte of a grammar matches them (a token terminal does). Exposed for tests and
  // benchmarks.
  static std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int vocab_size,
                                             const std::vector<int>& eos_ids);
  // The model's vocabulary, built on the first call.
  absl::StatusOr<std::shared_ptr<const TokenVocabulary>> Vocabulary();

 private:
  const Tokenizer* tokenizer_;
  const int vocab_size_;
  const std::vector<int> eos_ids_;

  absl::Mutex mu_;
  std::shared_ptr<const TokenVocabulary> vocabulary_ ABSL_GUARDED_BY(mu_);
  // Most recent last.
  std::deque<std::pair<std::string, std::shared_ptr<const Constraint>>> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_CONSTRAINT_COMPILER_H_
