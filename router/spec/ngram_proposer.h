// Prompt lookup (n-gram drafts): a sequence that repeats itself (quoting, summarizing, editing
// code, a greedy loop) has its next tokens earlier in its own prompt and output. No model, no
// allocation beyond the draft, no state: bounded backward scans of the caller's tokens.
//
//   tokens:  ... x  a  b  c  d ... y  a  b  c        last n = 3 tokens "a b c"
//                   └──────┘  ↑        └──────┘
//                   latest     draft   suffix
//                   earlier    starts
//                   occurrence here
//
// Thread-compatible (a free function over the caller's tokens).
#ifndef PAGODA_ROUTER_SPEC_NGRAM_PROPOSER_H_
#define PAGODA_ROUTER_SPEC_NGRAM_PROPOSER_H_

#include <span>
#include <vector>

namespace pagoda {

struct NgramOptions {
  // Suffix lengths tried, longest first (issue 27: 3 down to 1). REQUIRES: 1 <= min_n <= max_n.
  int min_n = 1;
  int max_n = 3;
  // The window searched: the last max_scan tokens (the suffix included). Bounds a call's cost
  // on long contexts: 2-3 us at 32k tokens here (docs/BENCHMARKS.md §21). REQUIRES: >= 0.
  int max_scan = 32768;
};

// Appends to *draft the up to k tokens that followed the latest earlier occurrence in `tokens`
// of its last n tokens (n from max_n down to min_n; the first n that matches wins) and returns
// how many: 0 when no suffix of at least min_n tokens occurs earlier, else k. A match within k
// tokens of the end is a loop of period tokens.size() - e (e: where the continuation starts), so
// the draft repeats it: a continuation that runs past the end reads the draft itself
// ("a b a b" proposes "a b a b ..."). k <= 0 proposes nothing.
// Cost: one backward scan of the window per n, each stopping at its first match (with AVX2,
// 16 positions per compare): O(max_n * max_scan) worst case, ~0.1 ns a token per n here.
// REQUIRES: options as documented (CHECKed: they are the caller's, never a request's); k is
// the caller's draft length (it reserves k tokens), not a request's value.
int ProposeNgram(std::span<const int> tokens, int k, std::vector<int>* draft,
                 const NgramOptions& options = {});

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_NGRAM_PROPOSER_H_
