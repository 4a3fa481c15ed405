// A regular expression (JSON Schema's `pattern`) as a GBNF expression for the inside of a JSON
// string: the characters the regex matches, written as JSON writes them (a quote as \", a
// newline as \n). The whole string must match (as vLLM and Outlines read `pattern`); ^ and $
// are accepted at the ends. Supported: literals and escapes, classes (with \d \w \s and
// negation), `.`, groups (capturing, (?:...), named), alternation, * + ? {m} {m,} {m,n} (lazy
// forms match the same strings). Refused by name: lookahead, lookbehind, backreferences,
// word boundaries, anchors inside the pattern.
#ifndef PAGODA_LIB_GRAMMAR_REGEX_TO_GBNF_H_
#define PAGODA_LIB_GRAMMAR_REGEX_TO_GBNF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pagoda {

// `json_string` false: the characters as themselves, for a regex over the whole output text
// (vLLM's guided_regex) rather than inside a JSON string.
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, bool json_string = true);

// A GBNF string literal ("...") for `bytes`.
std::string GbnfLiteral(std::string_view bytes);

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_REGEX_TO_GBNF_H_
