// The recent outputs of every request of one model, for drafts that no single prompt contains
// (the same answers, templates, tool-call JSON): like SuffixDecoding, simpler. A ring of the
// last max_tokens tokens (each Add's output with its prompt's last max_n tokens as left
// context), and per suffix length n a hash chain over it, as zlib's LZ77 matcher keeps:
//
//   heads[n][bucket(last n tokens)] ──► latest position p ──prev[n][p]──► older ──► ...
//
// A position's links are rewritten when the ring overwrites it, and every candidate a walk
// reaches is checked against the tokens the ring holds now (live, same Add, same n tokens), so
// an evicted or colliding entry can cost a step of the walk but never yields a draft.
//
// Memory, allocated at construction: 4 + 4 * num_orders * (1 + num_buckets / max_tokens)
// bytes a token held (num_orders = max_n - min_n + 1, num_buckets = max_tokens rounded up to a
// power of two): 28 bytes a token at the defaults (up to 40 for a max_tokens just past a power
// of two), plus 24 bytes an Add held.
//
// Thread-safe: the worker loops of one model share one index (Propose takes a reader lock).
#ifndef PAGODA_ROUTER_SPEC_SUFFIX_INDEX_H_
#define PAGODA_ROUTER_SPEC_SUFFIX_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pagoda {

struct SuffixIndexOptions {
  // Tokens held; the oldest are evicted first. REQUIRES: 1 <= max_tokens <= 2^30.
  int64_t max_tokens = int64_t{1} << 20;
  // Suffix lengths matched, longest first. REQUIRES: 1 <= min_n <= max_n <= 64.
  int min_n = 2;
  int max_n = 4;
  // Entries a walk visits (most recent first) to find the continuation seen most often; bounds
  // Propose's cost. REQUIRES: 1 <= max_chain <= 256.
  int max_chain = 32;
};

class SuffixIndex {
 public:
  explicit SuffixIndex(const SuffixIndexOptions& options);

  SuffixIndex(const SuffixIndex&) = delete;
  SuffixIndex& operator=(const SuffixIndex&) = delete;

  // Adds a finished (or long enough) output, with its prompt's tail as left context (only its
  // last max_n tokens are kept: what an n-gram that ends before the output's first token can
  // use). Only tokens of `output` are ever proposed. An Add longer than max_tokens keeps its
  // end. An empty output adds nothing.
  void Add(std::span<const int> context_tail, std::span<const int> output) ABSL_LOCKS_EXCLUDED(mu_);

  // Appends to *draft up to k tokens that followed the longest suffix of `context` (n from
  // max_n down to min_n) in what is held, and returns how many. The draft follows the latest
  // max_chain occurrences of that suffix as SuffixDecoding walks its tree: at each offset the
  // next token most of them agree on (ties: the most recent), then only those go on; it ends
  // at k tokens or when none has more (the end of its Add).
  // O(num_orders * max_chain * max_n + k * max_chain) worst case, O(max_n + max_chain * k)
  // when the longest suffix is held.
  int Propose(std::span<const int> context, int k, std::vector<int>* draft) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Tokens held now (<= max_tokens).
  size_t num_tokens() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes of the ring, the chains and the Adds held.
  size_t memory_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One Add's positions: [start, output_start) context, [output_start, end) output.
  struct Segment {
    uint64_t start, output_start, end;
  };
  struct Occurrence;

  uint64_t oldest() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return next_ > capacity_ ? next_ - capacity_ : 0;
  }
  size_t Bucket(uint64_t hash) const;
  // Links the n-grams that end at `end` (whose next token is end + 1) into their chains.
  void Link(uint64_t end, const Segment& segment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The held Add that holds live position p.
  const Segment& SegmentOf(uint64_t p) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Walks order n's chain for the last n tokens of `context` (hash `hash`) and fills `found`
  // with the held occurrences, most recent first. Returns how many (<= max_chain).
  int Walk(std::span<const int> context, int n, uint64_t hash, int k, Occurrence* found) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const SuffixIndexOptions options_;
  const int num_orders_;
  const uint64_t capacity_;
  const int bucket_bits_;

  mutable absl::Mutex mu_;
  std::vector<int> tokens_ ABSL_GUARDED_BY(mu_);  // (capacity) position p at p % capacity
  // (num_orders, capacity): distance back from the n-gram ending at p to the previous one in
  // its bucket; 0 = none.
  std::vector<uint32_t> prev_ ABSL_GUARDED_BY(mu_);
  // (num_orders, num_buckets): ring index + 1 of the latest n-gram end linked; 0 = none.
  std::vector<uint32_t> heads_ ABSL_GUARDED_BY(mu_);
  std::deque<Segment> segments_ ABSL_GUARDED_BY(mu_);  // by start, oldest first
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;             // the next position written
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_SPEC_SUFFIX_INDEX_H_
