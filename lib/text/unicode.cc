#include "lib/text/unicode.h"

#include <algorithm>
#include <span>
#include <vector>

#include "lib/text/utf8.h"

namespace pagoda {
namespace {

struct CodepointRange {
  uint32_t first, last;
};
struct CombiningClass {
  uint32_t cp;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t cp;
  uint8_t length;
  uint32_t to[4];
};
struct Composition {
  uint32_t first, second, composite;
};

#include "lib/text/unicode_tables.inc"

bool InRanges(std::span<const CodepointRange> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// Hangul syllables compose and decompose by formula.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

int CombiningClassOf(uint32_t cp) {
  auto it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](const CombiningClass& c, uint32_t x) { return c.cp < x; });
  return it != std::end(kCombiningClasses) && it->cp == cp ? it->ccc : 0;
}

void Decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, uint32_t x) { return d.cp < x; });
  if (it != std::end(kDecompositions) && it->cp == cp) {
    out->insert(out->end(), it->to, it->to + it->length);
  } else {
    out->push_back(cp);
  }
}

// The primary composite of (a, b), or 0.
uint32_t Compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  auto it = std::lower_bound(
      std::begin(kCompositions), std::end(kCompositions), std::make_pair(a, b),
      [](const Composition& c, auto key) { return std::make_pair(c.first, c.second) < key; });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string NormalizeNfc(std::string_view s) {
  // Below U+0300 there is nothing to decompose or compose with: most text is returned as is.
  bool simple = true;
  for (unsigned char c : s) simple = simple && c < 0xCC;
  if (simple) return std::string(s);
  std::vector<uint32_t> cps;
  for (uint32_t cp : DecodeUtf8(s)) Decompose(cp, &cps);
  // Canonical order: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (CombiningClassOf(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && CombiningClassOf(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](uint32_t a, uint32_t b) {
      return CombiningClassOf(a) < CombiningClassOf(b);
    });
    i = j;
  }
  // Compose each character with the last starter unless something in between blocks it.
  std::vector<uint32_t> out;
  size_t starter = SIZE_MAX;
  int last_ccc = -1;  // of the last character kept after the starter
  for (uint32_t cp : cps) {
    const int ccc = CombiningClassOf(cp);
    // Blocked when a character in between has class 0 or one at least this one's.
    if (starter != SIZE_MAX && (last_ccc == -1 || last_ccc < ccc)) {
      if (const uint32_t composite = Compose(out[starter], cp); composite != 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (ccc == 0) {
      starter = out.size();
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string result;
  for (uint32_t cp : out) AppendUtf8(cp, &result);
  return result;
}

bool IsUnicodeLetter(uint32_t cp) { return InRanges(kLetterRanges, cp); }
bool IsUnicodeNumber(uint32_t cp) { return InRanges(kNumberRanges, cp); }
bool IsUnicodeWhiteSpace(uint32_t cp) { return InRanges(kWhiteSpaceRanges, cp); }

}  // namespace pagoda
