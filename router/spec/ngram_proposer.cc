#include "router/spec/ngram_proposer.h"

#include <algorithm>
#include <cstddef>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "glog/logging.h"

namespace pagoda {
namespace {

// Whether t[e - n, e) equals the n tokens before `pattern_end`.
bool EndsWith(const int* t, size_t e, const int* pattern_end, size_t n) {
  for (size_t j = 1; j <= n; ++j) {
    if (t[e - j] != pattern_end[-static_cast<ptrdiff_t>(j)]) return false;
  }
  return true;
}

// The largest e in (lo, hi] with t[e - n, e) equal to the n tokens before `pattern_end`, or 0
// if none (0 is never an answer: e > lo). REQUIRES: lo >= n - 1. Most of a long context holds
// no candidate: with AVX2 (the build's x86-64-v3) 16 ends at a time are ruled out on the
// pattern's last (up to) 4 tokens, then a block with a hit is checked one end at a time.
size_t LatestEnd(const int* t, size_t lo, size_t hi, const int* pattern_end, size_t n) {
  size_t e = hi;
#if defined(__AVX2__)
  const size_t width = std::min<size_t>(n, 4);
  __m256i needles[4];
  for (size_t j = 0; j < width; ++j) needles[j] = _mm256_set1_epi32(pattern_end[-1 - j]);
  auto load = [t](size_t i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + i)); };
#endif
  while (e > lo) {
#if defined(__AVX2__)
    // Ends (e - 16, e] need t[e - 16 - (width - 1), e): in bounds, as e - 16 >= lo >= n - 1.
    while (e - lo >= 16) {
      __m256i a = _mm256_cmpeq_epi32(load(e - 16), needles[0]);
      __m256i b = _mm256_cmpeq_epi32(load(e - 8), needles[0]);
      for (size_t j = 1; j < width; ++j) {
        a = _mm256_and_si256(a, _mm256_cmpeq_epi32(load(e - 16 - j), needles[j]));
        b = _mm256_and_si256(b, _mm256_cmpeq_epi32(load(e - 8 - j), needles[j]));
      }
      const __m256i hits = _mm256_or_si256(a, b);
      if (!_mm256_testz_si256(hits, hits)) break;
      e -= 16;
    }
#endif
    const size_t stop = e - lo >= 16 ? e - 16 : lo;
    for (; e > stop; --e) {
      if (EndsWith(t, e, pattern_end, n)) return e;
    }
  }
  return 0;
}

}  // namespace

int ProposeNgram(std::span<const int> tokens, int k, std::vector<int>* draft,
                 const NgramOptions& options) {
  CHECK(options.min_n >= 1 && options.min_n <= options.max_n && options.max_scan >= 0)
      << "NgramOptions min_n=" << options.min_n << " max_n=" << options.max_n
      << " max_scan=" << options.max_scan;
  const size_t size = tokens.size();
  if (k <= 0 || size < 2) return 0;
  const size_t max_n = static_cast<size_t>(options.max_n);
  const size_t scan = static_cast<size_t>(options.max_scan);
  // The window is t[begin, size); an occurrence t[e - n, e) lies in it (e - n >= begin) and
  // before the suffix itself (e < size).
  const size_t begin = size > scan ? size - scan : 0;
  const int* t = tokens.data();
  // The latest occurrence of the last n tokens for n = 1, 2, ...: each ends where one of the
  // last n - 1 tokens does, so no later than the latest of those, which bounds its search.
  size_t best_n = 0, best_e = size - 1;
  for (size_t n = 1; n <= max_n; ++n) {
    const size_t e = LatestEnd(t, begin + n - 1, best_e, t + size, n);
    if (e == 0) break;
    best_n = n;
    best_e = e;
  }
  if (best_n < static_cast<size_t>(options.min_n)) return 0;
  // The continuation starts at best_e < size; past the end it reads what it has appended, which
  // is always behind it (best_e + i - size < i), so a loop repeats with its period.
  const size_t base = draft->size();
  draft->reserve(base + static_cast<size_t>(k));
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
    const size_t from = best_e + i;
    const int token = from < size ? t[from] : (*draft)[base + (from - size)];
    draft->push_back(token);
  }
  return k;
}

}  // namespace pagoda
