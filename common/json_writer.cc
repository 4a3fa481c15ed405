#include "common/json_writer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pagoda {
namespace {

// Length of the valid UTF-8 character at the start of `s`, or 0 if it is not one.
int ValidUtf8Length(std::string_view s) {
  const unsigned char c = s[0];
  int n;
  unsigned int min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0)
    n = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, min = 0x10000;
  else
    return 0;
  if (static_cast<int>(s.size()) < n) return 0;
  unsigned int cp = c & (0x3F >> (n - 1));
  for (int i = 1; i < n; ++i) {
    const unsigned char cc = s[i];
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  while (!s.empty()) {
    const unsigned char c = s[0];
    const int n = ValidUtf8Length(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      s.remove_prefix(1);
      continue;
    }
    if (n > 1) {
      out.append(s.substr(0, n));
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
    s.remove_prefix(n);
  }
  out += '"';
  return out;
}

std::string JsonIntArray(std::span<const int> values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

}  // namespace pagoda
