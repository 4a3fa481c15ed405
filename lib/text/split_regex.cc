#include "lib/text/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "lib/text/utf8.h"

namespace pagoda {
namespace {

pcre2_code* Code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

absl::StatusOr<std::unique_ptr<SplitRegex>> SplitRegex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "regex ", pattern, ": ", reinterpret_cast<const char*>(message), " at offset ", offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if it cannot
  return std::unique_ptr<SplitRegex>(new SplitRegex(code));
}

SplitRegex::~SplitRegex() { pcre2_code_free(Code(code_)); }

std::vector<std::pair<size_t, size_t>> SplitRegex::Split(absl::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(Code(code_), nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap = 0;  // start of the text not yet in a piece
  size_t at = 0;
  while (at <= text.size()) {
    int rc = pcre2_match(Code(code_), subject, text.size(), at, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // The JIT's stack ran out (a very long run): the interpreter keeps its state on the heap.
      rc = pcre2_match(Code(code_), subject, text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       match, nullptr);
    }
    if (rc < 0) break;  // no further match (or still an error: the rest is one piece)
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {
      // An empty match isolates nothing; step over one character.
      if (begin >= text.size()) break;
      at = begin + 1;
      while (at < text.size() && IsUtf8Continuation(text[at])) ++at;
      continue;
    }
    if (begin > gap) pieces.push_back({gap, begin});
    pieces.push_back({begin, end});
    gap = at = end;
  }
  if (gap < text.size()) pieces.push_back({gap, text.size()});
  pcre2_match_data_free(match);
  return pieces;
}

}  // namespace pagoda
