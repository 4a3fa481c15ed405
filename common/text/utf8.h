// UTF-8 validity, for text that must be valid UTF-8 (protobuf `string` fields, JSON) while
// token bytes need not be: a byte-fallback token can be half a character, or garbage.
#ifndef PAGODA_COMMON_TEXT_UTF8_H_
#define PAGODA_COMMON_TEXT_UTF8_H_

#include <string>
#include <string_view>

namespace pagoda {

inline constexpr int kUtf8Incomplete = -1;

// The length of the valid character at the start of `s` (1-4); 0 if no valid character can
// start there (a stray continuation byte, a bad lead, an overlong form, a surrogate, ...);
// kUtf8Incomplete if `s` ends inside a character that is valid so far.
int Utf8CharLength(std::string_view s);

// Appends the valid characters of `s` to `out` and U+FFFD for each byte that starts none.
// Returns how many bytes it consumed: all of them, unless `s` ends in an incomplete character
// and `hold_incomplete` is set, in which case those last bytes are left for later.
size_t AppendValidUtf8(std::string_view s, bool hold_incomplete, std::string* out);

// `s` with every invalid byte replaced by U+FFFD.
std::string ValidUtf8(std::string_view s);

}  // namespace pagoda

#endif  // PAGODA_COMMON_TEXT_UTF8_H_
