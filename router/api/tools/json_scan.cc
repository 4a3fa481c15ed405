#include "router/api/tools/json_scan.h"

namespace pagoda {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

ScanResult ScanString(std::string_view text, size_t* pos) {
  size_t i = *pos + 1;  // past the opening quote
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"') {
      *pos = i + 1;
      return ScanResult::kComplete;
    }
    if (c < 0x20) return ScanResult::kInvalid;
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

// Numbers are checked loosely (a sign, digits, a point, an exponent in a plausible order): the
// value's text is handed on as it is, and parsed where it is used.
ScanResult ScanNumber(std::string_view text, size_t* pos) {
  size_t i = *pos;
  if (text[i] == '-') ++i;
  bool digits = false;
  while (i < text.size() && (IsDigit(text[i]) || text[i] == '.' || text[i] == 'e' ||
                             text[i] == 'E' || text[i] == '+' || text[i] == '-')) {
    digits = digits || IsDigit(text[i]);
    ++i;
  }
  // A number can always go on: it is whole only once something follows it.
  if (i == text.size()) return ScanResult::kIncomplete;
  if (!digits) return ScanResult::kInvalid;
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
