#include "common/json_writer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/text/utf8.h"

namespace pagoda {

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  while (!s.empty()) {
    const unsigned char c = s[0];
    const int n = Utf8CharLength(s);
    if (n <= 0) {
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
