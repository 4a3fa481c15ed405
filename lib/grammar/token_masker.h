// The token mask: which tokens of a vocabulary a sequence's grammar state allows next, as one
// bit per token id. One TokenMasker per (grammar, vocabulary), shared by every sequence that
// uses the grammar; thread-safe.
//
// A mask walks the vocabulary's byte trie with the matcher's stacks, skipping every subtree
// whose prefix the grammar refuses. Most of a walk depends on the top few frames of a stack
// only (inside a JSON string, any token without a quote is fine whatever the string belongs
// to), so, as XGrammar does, the walk is done once per distinct top of stack, `context_frames`
// deep, with the frames below replaced by a stand-in, and cached:
//   accepted:  tokens those frames take whole, whatever lies below: allowed for every stack
//              with that top;
//   uncertain: tokens that run past the bottom of those frames: checked against the real
//              stack, one by one, when a mask is asked for.
// A mask is then: OR the cached bitmasks of each live stack, check its uncertain tokens. A
// stack whose top is a token terminal adds its token (or every other one) without a walk.
#ifndef PAGODA_LIB_GRAMMAR_TOKEN_MASKER_H_
#define PAGODA_LIB_GRAMMAR_TOKEN_MASKER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/grammar/token_vocabulary.h"

namespace pagoda {

struct TokenMaskerOptions {
  int context_frames = 4;                 // frames of a stack a cached walk looks at
  size_t cache_bytes = size_t{64} << 20;  // past it, walks are done each time and not kept
  // Distinct sets of stacks a walk memoizes transitions for (1 KB each); a walk that needs
  // more, or 0 here, steps every trie node through the matcher instead.
  int memo_sets = 4096;
};

class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const Grammar> grammar,
              std::shared_ptr<const TokenVocabulary> vocabulary, TokenMaskerOptions options = {});

  // Sets `mask` (vocabulary().mask_words() words, bit `id % 64` of word `id / 64`) to the
  // tokens `matcher` accepts next: EOS exactly when the grammar is complete, never a token with
  // no bytes. The matcher's state is unchanged (its scratch frames are dropped). An error
  // (RESOURCE_EXHAUSTED) when the matcher's limits were passed; the sequence cannot go on.
  absl::Status FillMask(GrammarMatcher& matcher, std::span<uint64_t> mask);

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  // What the cache holds (for benchmarks and metrics).
  size_t cached_entries() const;
  size_t cached_bytes() const;

 private:
  struct Entry {
    std::vector<uint64_t> accepted;  // (mask_words)
    std::vector<int32_t> uncertain;  // token ids
  };
  // The frames' positions, top first; the last value is 1 when the stack goes on below them.
  using Key = std::vector<int32_t>;

  absl::StatusOr<std::shared_ptr<const Entry>> Lookup(const Key& key);
  void AllBut(int token, std::span<uint64_t> mask) const;
  absl::StatusOr<std::shared_ptr<const Entry>> Walk(const Key& key) const;
  absl::StatusOr<std::shared_ptr<const Entry>> MemoWalk(const Key& key) const;
  absl::StatusOr<std::shared_ptr<const Entry>> TruncatingWalk(const Key& key) const;

  // Constant after construction.
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  TokenMaskerOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::shared_ptr<const Entry>> cache_ ABSL_GUARDED_BY(mu_);
  size_t cache_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_TOKEN_MASKER_H_
