#include "router/api/openai/tools/json_scan.h"

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

namespace pagoda {
namespace {

// JsonScanner's number states: JSON's -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as the
// recursive ScanNumber reads it.
enum Number : uint8_t {
  kNumStart,     // '-' or a digit
  kNumMinus,     // a digit must follow
  kNumZero,      // after a leading 0: '.', 'e' or the end
  kNumInt,       // in the integer's digits
  kNumDot,       // a digit must follow
  kNumFraction,  // in the fraction's digits
  kNumE,         // '+', '-' or a digit
  kNumSign,      // a digit must follow
  kNumExponent,  // in the exponent's digits
};

}  // namespace

void JsonScanner::ValueDone(size_t i) {
  if (depth_ == 0) {
    state_ = State::kDone;
    result_ = ScanResult::kComplete;
    end_ = i;
  } else {
    state_ = State::kAfterItem;
  }
}

ScanResult JsonScanner::Scan(std::string_view text, size_t* end) {
  auto invalid = [&] {
    state_ = State::kDone;
    result_ = ScanResult::kInvalid;
    return result_;
  };
  size_t i = i_;
  while (state_ != State::kDone && i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool object = depth_ > 0 && ((objects_ >> (depth_ - 1)) & 1);
    switch (state_) {
      case State::kValue:
        if (IsSpace(c)) {
          ++i;
        } else if (c == '{' || c == '[') {
          if (depth_ >= kMaxScanDepth) return invalid();
          objects_ = (objects_ & ~(uint64_t{1} << depth_)) | (uint64_t{c == '{'} << depth_);
          ++depth_;
          state_ = State::kFirst;
          ++i;
        } else if (c == '"') {
          state_ = State::kString;
          key_ = false;
          ++i;
        } else if (c == '-' || IsDigit(c)) {
          state_ = State::kNumber;
          number_ = kNumStart;
        } else if (c == 't' || c == 'f' || c == 'n') {
          state_ = State::kLiteral;
          word_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
          word_at_ = 0;
        } else {
          return invalid();
        }
        break;
      case State::kFirst:
      case State::kAfterItem:
        if (IsSpace(c)) {
          ++i;
        } else if (c == (object ? '}' : ']')) {
          --depth_;
          ValueDone(++i);
        } else if (state_ == State::kFirst) {
          state_ = object ? State::kKey : State::kValue;
        } else if (c == ',') {
          state_ = object ? State::kKey : State::kValue;
          ++i;
        } else {
          return invalid();
        }
        break;
      case State::kKey:
        if (IsSpace(c)) {
          ++i;
        } else if (c == '"') {
          state_ = State::kString;
          key_ = true;
          ++i;
        } else {
          return invalid();
        }
        break;
      case State::kColon:
        if (IsSpace(c)) {
          ++i;
        } else if (c == ':') {
          state_ = State::kValue;
          ++i;
        } else {
          return invalid();
        }
        break;
      case State::kString:
        if (utf8_ > 0) {
          if (c < lo_ || c > hi_) return invalid();
          lo_ = 0x80;
          hi_ = 0xbf;
          --utf8_;
        } else if (escape_ == 1) {
          if (c == 'u') {
            escape_ = 5;
          } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                     c == 'r' || c == 't') {
            escape_ = 0;
          } else {
            return invalid();
          }
        } else if (escape_ > 1) {
          if (!IsHex(c)) return invalid();
          escape_ = escape_ == 2 ? 0 : escape_ - 1;
        } else if (c == '"') {
          if (key_) {
            state_ = State::kColon;
            ++i;
            break;
          }
          ValueDone(i + 1);
        } else if (c < 0x20) {
          return invalid();
        } else if (c >= 0x80) {
          const int tail = Utf8Tail(c, &lo_, &hi_);
          if (tail < 0) return invalid();
          utf8_ = tail;
        } else if (c == '\\') {
          escape_ = 1;
        }
        ++i;
        break;
      case State::kNumber: {
        const bool digit = IsDigit(c);
        const bool e = c == 'e' || c == 'E';
        bool ends = false;
        switch (number_) {
          case kNumStart:
            number_ = c == '-' ? kNumMinus : c == '0' ? kNumZero : kNumInt;
            break;
          case kNumMinus:
            if (!digit) return invalid();
            number_ = c == '0' ? kNumZero : kNumInt;
            break;
          case kNumZero:
          case kNumInt:
            if (digit && number_ == kNumInt) break;
            if (c == '.') {
              number_ = kNumDot;
            } else if (e) {
              number_ = kNumE;
            } else {
              ends = true;
            }
            break;
          case kNumDot:
            if (!digit) return invalid();
            number_ = kNumFraction;
            break;
          case kNumFraction:
            if (digit) break;
            if (e) {
              number_ = kNumE;
            } else {
              ends = true;
            }
            break;
          case kNumE:
            if (c == '+' || c == '-') {
              number_ = kNumSign;
              break;
            }
            [[fallthrough]];
          case kNumSign:
            if (!digit) return invalid();
            number_ = kNumExponent;
            break;
          case kNumExponent:
            ends = !digit;
            break;
        }
        if (ends) {
          ValueDone(i);  // the byte after the number is its container's
        } else {
          ++i;
        }
        break;
      }
      case State::kLiteral:
        if (c != static_cast<unsigned char>(word_[word_at_])) return invalid();
        ++i;
        if (word_[++word_at_] == '\0') ValueDone(i);
        break;
      case State::kDone:
        break;
    }
  }
  i_ = i;
  if (result_ == ScanResult::kComplete) *end = end_;
  return result_;
}

}  // namespace pagoda
