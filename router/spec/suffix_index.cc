#include "router/spec/suffix_index.h"

#include <algorithm>
#include <array>
#include <bit>

#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr int kMaxChain = 256;
constexpr int kMaxN = 64;
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The hash of a suffix grows one token to the left per step: hash(n) = Mix(hash(n - 1), the
// token n back from the end), so Propose and Link get every order's hash in one pass.
uint64_t Mix(uint64_t hash, int token) {
  hash ^= static_cast<uint32_t>(token) + kGolden + (hash << 6) + (hash >> 2);
  return hash * kGolden;
}

}  // namespace

struct SuffixIndex::Occurrence {
  size_t next;  // ring index of the token after the suffix's occurrence
  int room;     // tokens from there to the end of its Add, up to k
};

SuffixIndex::SuffixIndex(const SuffixIndexOptions& options)
    : options_(options),
      num_orders_(options.max_n - options.min_n + 1),
      capacity_(static_cast<uint64_t>(options.max_tokens)),
      bucket_bits_(std::max(
          1, static_cast<int>(std::bit_width(static_cast<uint64_t>(options.max_tokens) - 1)))) {
  CHECK(options.max_tokens >= 1 && options.max_tokens <= (int64_t{1} << 30))
      << "SuffixIndexOptions max_tokens=" << options.max_tokens;
  CHECK(options.min_n >= 1 && options.min_n <= options.max_n && options.max_n <= kMaxN)
      << "SuffixIndexOptions min_n=" << options.min_n << " max_n=" << options.max_n;
  CHECK(options.max_chain >= 1 && options.max_chain <= kMaxChain)
      << "SuffixIndexOptions max_chain=" << options.max_chain;
  absl::MutexLock lock(&mu_);
  tokens_.assign(capacity_, 0);
  prev_.assign(static_cast<size_t>(num_orders_) * capacity_, 0);
  heads_.assign(static_cast<size_t>(num_orders_) << bucket_bits_, 0);
}

size_t SuffixIndex::Bucket(uint64_t hash) const {
  return static_cast<size_t>((hash * kGolden) >> (64 - bucket_bits_));
}

void SuffixIndex::Add(std::span<const int> context_tail, std::span<const int> output) {
  if (output.empty()) return;
  const size_t max_n = static_cast<size_t>(options_.max_n);
  if (context_tail.size() > max_n) context_tail = context_tail.last(max_n);
  // An Add longer than the ring keeps its end: the context goes first, then the output's head.
  const size_t total = context_tail.size() + output.size();
  if (total > capacity_) {
    const size_t drop = total - capacity_;
    const size_t context_drop = std::min(drop, context_tail.size());
    context_tail = context_tail.subspan(context_drop);
    output = output.subspan(drop - context_drop);
  }
  absl::MutexLock lock(&mu_);
  const Segment segment{next_, next_ + context_tail.size(),
                        next_ + context_tail.size() + output.size()};
  for (uint64_t p = segment.start; p < segment.end; ++p) {
    const size_t index = p % capacity_;
    tokens_[index] = p < segment.output_start ? context_tail[p - segment.start]
                                              : output[p - segment.output_start];
    for (int order = 0; order < num_orders_; ++order) prev_[order * capacity_ + index] = 0;
    next_ = p + 1;
    // The n-grams that end just before an output token now have their next token.
    if (p >= segment.output_start && p > segment.start) Link(p - 1, segment);
  }
  while (!segments_.empty() && segments_.front().end <= oldest()) segments_.pop_front();
  segments_.push_back(segment);
}

void SuffixIndex::Link(uint64_t end, const Segment& segment) {
  const size_t index = end % capacity_;
  const uint64_t newest = next_ - 1;
  const size_t newest_index = newest % capacity_;
  uint64_t hash = 0;
  for (int n = 1; n <= options_.max_n && end + 1 >= segment.start + n; ++n) {
    hash = Mix(hash, tokens_[(end + 1 - n) % capacity_]);
    if (n < options_.min_n) continue;
    const size_t order = static_cast<size_t>(n - options_.min_n);
    uint32_t& head = heads_[(order << bucket_bits_) + Bucket(hash)];
    if (head != 0) {
      // The head's ring index holds its position unless the ring overwrote it, in which case
      // the whole chain is evicted and the link leads nowhere a walk would accept.
      const uint64_t back = (newest_index + capacity_ - (head - 1)) % capacity_;
      const uint64_t linked = newest - back;
      if (linked < end) prev_[order * capacity_ + index] = static_cast<uint32_t>(end - linked);
    }
    head = static_cast<uint32_t>(index + 1);
  }
}

const SuffixIndex::Segment& SuffixIndex::SegmentOf(uint64_t p) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), p,
                             [](uint64_t q, const Segment& s) { return q < s.start; });
  CHECK(it != segments_.begin()) << "position " << p << " is in no segment";
  return *(it - 1);
}

int SuffixIndex::Walk(std::span<const int> context, int n, uint64_t hash, int k,
                      Occurrence* found) const {
  const size_t order = static_cast<size_t>(n - options_.min_n);
  const uint32_t head = heads_[(order << bucket_bits_) + Bucket(hash)];
  if (head == 0) return 0;
  const uint64_t low = oldest();
  const uint64_t newest = next_ - 1;
  // Ring indices step back with a conditional add: no division per step.
  auto back = [this](size_t index, uint64_t distance) {
    return index >= distance ? index - distance : index + capacity_ - distance;
  };
  size_t index = head - 1;
  uint64_t end = newest - back(newest % capacity_, index);
  const uint32_t* prev = &prev_[order * capacity_];
  const int* suffix_end = context.data() + context.size();
  int num_found = 0;
  for (int step = 0; step < options_.max_chain && end >= low; ++step) {
    // An occurrence: n live tokens equal to the suffix, followed by a token (the cheap tests
    // first; then in one Add, followed by an output token).
    bool match = end + 1 >= low + n && end < newest;
    for (int i = 1; match && i <= n; ++i) match = tokens_[back(index, i - 1)] == suffix_end[-i];
    if (match) {
      const Segment& segment = SegmentOf(end);
      if (end + 1 >= segment.start + n && end + 1 >= segment.output_start &&
          end + 1 < segment.end) {
        found[num_found++] = {index + 1 == capacity_ ? 0 : index + 1,
                              static_cast<int>(std::min<uint64_t>(segment.end - (end + 1), k))};
      }
    }
    const uint32_t distance = prev[index];
    if (distance == 0 || end - low < distance) break;
    end -= distance;
    index = back(index, distance);
  }
  return num_found;
}

int SuffixIndex::Propose(std::span<const int> context, int k, std::vector<int>* draft) const {
  if (k <= 0 || context.size() < static_cast<size_t>(options_.min_n)) return 0;
  const int max_n = static_cast<int>(std::min<size_t>(options_.max_n, context.size()));
  std::array<uint64_t, kMaxN + 1> hashes;  // hashes[n]: the last n tokens of context
  hashes[0] = 0;
  for (int n = 1; n <= max_n; ++n) hashes[n] = Mix(hashes[n - 1], context[context.size() - n]);
  std::array<Occurrence, kMaxChain> found;
  absl::ReaderMutexLock lock(&mu_);
  if (next_ == 0) return 0;
  int num_found = 0;
  for (int n = max_n; n >= options_.min_n && num_found == 0; --n) {
    num_found = Walk(context, n, hashes[n], k, found.data());
  }
  // The most frequent path through the occurrences' continuations (SuffixDecoding's walk of
  // its suffix tree): at each offset the token most of the surviving occurrences have (ties:
  // the most recent), then only those go on. found[0, num_found) is most recent first.
  struct Count {
    int token, count;
  };
  std::array<Count, kMaxChain> counts;
  int drafted = 0;
  for (; drafted < k; ++drafted) {
    int num_counts = 0;
    for (int i = 0; i < num_found; ++i) {
      if (found[i].room <= drafted) continue;
      const int token = tokens_[found[i].next];
      int c = 0;
      while (c < num_counts && counts[c].token != token) ++c;
      if (c == num_counts) counts[num_counts++] = {token, 0};
      ++counts[c].count;
    }
    if (num_counts == 0) break;
    const Count* best = &counts[0];  // the first of the most counted is the most recent
    for (int c = 1; c < num_counts; ++c) {
      if (counts[c].count > best->count) best = &counts[c];
    }
    draft->push_back(best->token);
    int survivors = 0;
    for (int i = 0; i < num_found; ++i) {
      if (found[i].room <= drafted || tokens_[found[i].next] != best->token) continue;
      found[survivors] = found[i];
      if (++found[survivors].next == capacity_) found[survivors].next = 0;
      ++survivors;
    }
    num_found = survivors;
  }
  return drafted;
}

size_t SuffixIndex::num_tokens() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<size_t>(next_ - oldest());
}

size_t SuffixIndex::memory_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return tokens_.size() * sizeof(int) + prev_.size() * sizeof(uint32_t) +
         heads_.size() * sizeof(uint32_t) + segments_.size() * sizeof(Segment);
}

}  // namespace pagoda
