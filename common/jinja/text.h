// Python's str methods over UTF-8: Python strings index by code point, so lengths, slices
// and reversal count code points, not bytes. Case mapping covers ASCII only.
#ifndef PAGODA_COMMON_JINJA_TEXT_H_
#define PAGODA_COMMON_JINJA_TEXT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

// The code point starting at s[i] and its byte length (U+FFFD, 1 for an invalid byte).
char32_t DecodeCodePoint(std::string_view s, size_t i, size_t* length);
std::u32string ToCodePoints(std::string_view s);
std::string FromCodePoints(std::u32string_view s);
void AppendCodePoint(char32_t c, std::string* out);
// len(s).
size_t CodePointCount(std::string_view s);

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
// str.splitlines() for \n, \r\n and \r.
std::vector<std::string> SplitLines(std::string_view s);

}  // namespace pagoda::jinja

#endif  // PAGODA_COMMON_JINJA_TEXT_H_
