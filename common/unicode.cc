#include "common/unicode.h"

#include <algorithm>
#include <span>

#include "common/utf8.h"

namespace pagoda {
namespace {

struct CodepointRange {
  uint32_t first, last;
};

#include "common/unicode_tables.inc"

bool InRanges(std::span<const CodepointRange> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

}  // namespace

bool IsUnicodeLetter(uint32_t cp) { return InRanges(kLetterRanges, cp); }
bool IsUnicodeNumber(uint32_t cp) { return InRanges(kNumberRanges, cp); }
bool IsUnicodeWhiteSpace(uint32_t cp) { return InRanges(kWhiteSpaceRanges, cp); }

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const int n = Utf8CharLength(s.substr(i));
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    const unsigned char c = s[i];
    uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace pagoda
