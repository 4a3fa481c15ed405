// Python's str methods over UTF-8: Python strings index by code point, so lengths, slices
// and reversal count code points, not bytes (lib/text/utf8.h decodes them). Case mapping
// covers ASCII only.
#ifndef PAGODA_LIB_JINJA_TEXT_H_
#define PAGODA_LIB_JINJA_TEXT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

// str.isspace() for one code point.
bool IsPythonSpace(char32_t c);

// str.strip / lstrip / rstrip; `chars` absent strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep, maxsplit); an absent `sep` splits on runs of whitespace. REQUIRES: sep != "".
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
// str.title() and str.capitalize().
std::string PythonTitle(std::string_view s);
std::string PythonCapitalize(std::string_view s);
// markupsafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string HtmlEscape(std::string_view s);
// str.splitlines() for \n, \r\n and \r.
std::vector<std::string> SplitLines(std::string_view s);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_TEXT_H_
