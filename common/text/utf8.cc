#include "common/text/utf8.h"

namespace pagoda {

int Utf8CharLength(std::string_view s) {
  if (s.empty()) return kUtf8Incomplete;
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  int n;
  unsigned int min;
  if ((c & 0xE0) == 0xC0) {
    n = 2, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  unsigned int cp = c & (0x3F >> (n - 1));
  for (int i = 1; i < n; ++i) {
    if (i >= static_cast<int>(s.size())) return kUtf8Incomplete;
    const unsigned char cc = s[i];
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

size_t AppendValidUtf8(std::string_view s, bool hold_incomplete, std::string* out) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = Utf8CharLength(s.substr(i));
    if (n > 0) {
      out->append(s.substr(i, n));
      i += n;
    } else if (n == kUtf8Incomplete && hold_incomplete) {
      break;
    } else {
      *out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return i;
}

std::string ValidUtf8(std::string_view s) {
  std::string out;
  AppendValidUtf8(s, /*hold_incomplete=*/false, &out);
  return out;
}

}  // namespace pagoda
