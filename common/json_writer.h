// Minimal JSON output helpers for the CLI's --json modes.
#ifndef PAGODA_COMMON_JSON_WRITER_H_
#define PAGODA_COMMON_JSON_WRITER_H_

#include <span>
#include <string>
#include <string_view>

namespace pagoda {

// `s` as a JSON string literal (quotes included). Invalid UTF-8 becomes U+FFFD, so the output
// is always valid JSON even when a token stream ends inside a character.
std::string JsonQuote(std::string_view s);
// `[1,2,3]`
std::string JsonIntArray(std::span<const int> values);

}  // namespace pagoda

#endif  // PAGODA_COMMON_JSON_WRITER_H_
