#include "router/api/tools/json_scan.h"

namespace pagoda {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A UTF-8 character's bytes after its lead byte `c` (0 for ASCII), and the range of the first
// of them (RFC 3629's table: no overlong forms, surrogates or code points past U+10FFFF).
// -1: `c` cannot start a character.
int Utf8Tail(unsigned char c, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xbf;
  if (c < 0x80) return 0;
  if (c >= 0xc2 && c <= 0xdf) return 1;
  if (c >= 0xe0 && c <= 0xef) {
    if (c == 0xe0) *lo = 0xa0;
    if (c == 0xed) *hi = 0x9f;
    return 2;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (c == 0xf0) *lo = 0x90;
    if (c == 0xf4) *hi = 0x8f;
    return 3;
  }
  return -1;
}

ScanResult ScanString(std::string_view text, size_t* pos) {
  size_t i = *pos + 1;  // past the opening quote
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"') {
      *pos = i + 1;
      return ScanResult::kComplete;
    }
    if (c < 0x20) return ScanResult::kInvalid;
    if (c >= 0x80) {
      unsigned char lo, hi;
      const int tail = Utf8Tail(c, &lo, &hi);
      if (tail < 0) return ScanResult::kInvalid;
      for (int k = 1; k <= tail; ++k) {
        if (i + k >= text.size()) return ScanResult::kIncomplete;
        const unsigned char b = static_cast<unsigned char>(text[i + k]);
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return ScanResult::kInvalid;
      }
      i += tail + 1;
      continue;
    }
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return ScanResult::kIncomplete;
    const char e = text[i + 1];
    if (e == 'u') {
      for (size_t k = i + 2; k < i + 6; ++k) {
        if (k >= text.size()) return ScanResult::kIncomplete;
        if (!IsHex(text[k])) return ScanResult::kInvalid;
      }
      i += 6;
    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
               e == 't') {
      i += 2;
    } else {
      return ScanResult::kInvalid;
    }
  }
  return ScanResult::kIncomplete;
}

// JSON's number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. A number can always go on, so
// it is whole only once something follows it.
ScanResult ScanNumber(std::string_view text, size_t* pos) {
  size_t i = *pos;
  const size_t n = text.size();
  auto digits = [&] {
    while (i < n && IsDigit(text[i])) ++i;
  };
  if (text[i] == '-' && ++i == n) return ScanResult::kIncomplete;
  if (text[i] == '0') {
    ++i;
  } else if (IsDigit(text[i])) {
    digits();
  } else {
    return ScanResult::kInvalid;
  }
  if (i < n && text[i] == '.') {
    if (++i == n) return ScanResult::kIncomplete;
    if (!IsDigit(text[i])) return ScanResult::kInvalid;
    digits();
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    if (++i == n) return ScanResult::kIncomplete;
    if ((text[i] == '+' || text[i] == '-') && ++i == n) return ScanResult::kIncomplete;
    if (!IsDigit(text[i])) return ScanResult::kInvalid;
    digits();
  }
  if (i == n) return ScanResult::kIncomplete;
  *pos = i;
  return ScanResult::kComplete;
}

ScanResult ScanLiteral(std::string_view text, size_t* pos, std::string_view word) {
  const std::string_view rest = text.substr(*pos, word.size());
  if (rest != word.substr(0, rest.size())) return ScanResult::kInvalid;
  if (rest.size() < word.size()) return ScanResult::kIncomplete;
  *pos += word.size();
  return ScanResult::kComplete;
}

ScanResult ScanValue(std::string_view text, size_t* pos, int depth);

// An object or array: `open` at text[*pos].
ScanResult ScanContainer(std::string_view text, size_t* pos, int depth) {
  if (depth >= kMaxScanDepth) return ScanResult::kInvalid;
  const bool object = text[*pos] == '{';
  const char close = object ? '}' : ']';
  size_t i = *pos + 1;
  SkipJsonSpace(text, &i);
  if (i >= text.size()) return ScanResult::kIncomplete;
  if (text[i] == close) {
    *pos = i + 1;
    return ScanResult::kComplete;
  }
  for (;;) {
    if (object) {
      if (text[i] != '"') return ScanResult::kInvalid;
      if (ScanResult r = ScanString(text, &i); r != ScanResult::kComplete) return r;
      SkipJsonSpace(text, &i);
      if (i >= text.size()) return ScanResult::kIncomplete;
      if (text[i] != ':') return ScanResult::kInvalid;
      ++i;
    }
    if (ScanResult r = ScanValue(text, &i, depth + 1); r != ScanResult::kComplete) return r;
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
    if (text[i] == close) {
      *pos = i + 1;
      return ScanResult::kComplete;
    }
    if (text[i] != ',') return ScanResult::kInvalid;
    ++i;
    SkipJsonSpace(text, &i);
    if (i >= text.size()) return ScanResult::kIncomplete;
  }
}

ScanResult ScanValue(std::string_view text, size_t* pos, int depth) {
  SkipJsonSpace(text, pos);
  if (*pos >= text.size()) return ScanResult::kIncomplete;
  const char c = text[*pos];
  if (c == '{' || c == '[') return ScanContainer(text, pos, depth);
  if (c == '"') return ScanString(text, pos);
  if (c == '-' || IsDigit(c)) return ScanNumber(text, pos);
  if (c == 't') return ScanLiteral(text, pos, "true");
  if (c == 'f') return ScanLiteral(text, pos, "false");
  if (c == 'n') return ScanLiteral(text, pos, "null");
  return ScanResult::kInvalid;
}

}  // namespace

void SkipJsonSpace(std::string_view text, size_t* pos) {
  while (*pos < text.size() && IsSpace(text[*pos])) ++*pos;
}

ScanResult ScanJsonValue(std::string_view text, size_t* pos) {
  size_t i = *pos;
  const ScanResult r = ScanValue(text, &i, 0);
  if (r == ScanResult::kComplete) *pos = i;
  return r;
}

}  // namespace pagoda
