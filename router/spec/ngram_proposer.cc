#include "router/spec/ngram_proposer.h"

#include <algorithm>
#include <cstddef>

#include "glog/logging.h"

namespace pagoda {

int ProposeNgram(std::span<const int> tokens, int k, std::vector<int>* draft,
                 const NgramOptions& options) {
  CHECK(options.min_n >= 1 && options.min_n <= options.max_n && options.max_scan >= 0)
      << "NgramOptions min_n=" << options.min_n << " max_n=" << options.max_n
      << " max_scan=" << options.max_scan;
  const size_t size = tokens.size();
  if (k <= 0 || size < 2) return 0;
  const size_t max_n = static_cast<size_t>(options.max_n);
  const size_t min_n = static_cast<size_t>(options.min_n);
  const size_t scan = static_cast<size_t>(options.max_scan);
  // The window is tokens[begin, size); an occurrence tokens[e - n, e) lies in it with e < size.
  const size_t begin = size > scan ? size - scan : 0;
  const int* t = tokens.data();
  const int last = t[size - 1];
  size_t best_n = 0, best_e = 0;
  // Latest first, so the first e to reach a length is that length's latest occurrence.
  for (size_t e = size - 1; e >= begin + min_n; --e) {
    if (t[e - 1] != last) continue;
    size_t n = 1;
    while (n < max_n && e - n > begin && t[e - 1 - n] == t[size - 1 - n]) ++n;
    if (n > best_n) {
      best_n = n;
      best_e = e;
      if (n == max_n) break;
    }
  }
  if (best_n < min_n) return 0;
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
