// The one UTF-8 codec (tokenizers, the chat-template engine, the text sent to clients), header
// only so that the Jinja library needs nothing of text/ but this file. Thread-safe: pure
// functions.
//
// Validity is strict (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF. Where
// a decoder meets an invalid byte it yields U+FFFD for that one byte and goes on with the next,
// as Python's errors="replace" does for each byte that starts no character. Text that must be
// valid UTF-8 (protobuf `string` fields, JSON) goes through ValidUtf8, while token bytes need
// not be valid: a byte-fallback token can be half a character, or garbage.
#ifndef PAGODA_LIB_TEXT_UTF8_H_
#define PAGODA_LIB_TEXT_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda {

inline constexpr int kUtf8Incomplete = -1;
inline constexpr char32_t kReplacementCharacter = 0xFFFD;

inline bool IsUtf8Continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// The length (1-4) of the character a byte starts, by its high bits alone; 0 for a
// continuation byte or 0xF8..0xFF, which start none.
inline int Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

// Decodes the character at the start of `s` into `*cp`. Returns its length (1-4); 0 if no
// valid character starts there (a stray continuation byte, a bad lead, an overlong form, a
// surrogate, ...); kUtf8Incomplete if `s` ends inside a character that is valid so far.
inline int DecodeUtf8Char(std::string_view s, char32_t* cp) {
  if (s.empty()) return kUtf8Incomplete;
  const unsigned char lead = s[0];
  const int n = Utf8SequenceLength(lead);
  if (n <= 1) {
    *cp = lead;
    return n;
  }
  constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // the shortest form of each length
  char32_t c = lead & (0x3F >> (n - 1));
  for (int i = 1; i < n; ++i) {
    if (i >= static_cast<int>(s.size())) return kUtf8Incomplete;
    const unsigned char cc = s[i];
    if (!IsUtf8Continuation(cc)) return 0;
    c = (c << 6) | (cc & 0x3F);
  }
  if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return n;
}

// The length of the valid character at the start of `s` (see DecodeUtf8Char).
inline int Utf8CharLength(std::string_view s) {
  char32_t cp;
  return DecodeUtf8Char(s, &cp);
}

// The code point at s[i] and, in `*length`, its bytes: U+FFFD and 1 where s[i] starts no
// complete valid character. REQUIRES: i < s.size().
inline char32_t Utf8CodePointAt(std::string_view s, size_t i, size_t* length) {
  char32_t cp;
  const int n = DecodeUtf8Char(s.substr(i), &cp);
  *length = n > 0 ? n : 1;
  return n > 0 ? cp : kReplacementCharacter;
}

inline void AppendUtf8(char32_t cp, std::string* out) {
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

// The code points of `s`, U+FFFD for each byte that starts no valid character.
inline std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0, length = 0; i < s.size(); i += length) out += Utf8CodePointAt(s, i, &length);
  return out;
}

inline std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (const char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

// DecodeUtf8(s).size() without building it: Python's len(s).
inline size_t Utf8CodePointCount(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0, length = 0; i < s.size(); i += length, ++count) Utf8CodePointAt(s, i, &length);
  return count;
}

// Appends the valid characters of `s` to `out` and U+FFFD for each byte that starts none.
// Returns how many bytes it consumed: all of them, unless `s` ends in an incomplete character
// and `hold_incomplete` is set, in which case those last bytes are left for later.
inline size_t AppendValidUtf8(std::string_view s, bool hold_incomplete, std::string* out) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = Utf8CharLength(s.substr(i));
    if (n > 0) {
      out->append(s.substr(i, n));
      i += n;
    } else if (n == kUtf8Incomplete && hold_incomplete) {
      break;
    } else {
      AppendUtf8(kReplacementCharacter, out);
      ++i;
    }
  }
  return i;
}

// `s` with every invalid byte replaced by U+FFFD.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  AppendValidUtf8(s, /*hold_incomplete=*/false, &out);
  return out;
}

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_UTF8_H_
