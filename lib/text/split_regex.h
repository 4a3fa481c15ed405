// A Hugging Face `Split` pre-tokenizer regex (behavior "Isolated"), run with PCRE2 in UTF mode
// with Unicode properties (\p{L}, \p{N}, Unicode \s), JIT-compiled when PCRE2 can. Thread-safe:
// the compiled pattern is shared, each call has its own match data.
#ifndef PAGODA_LIB_TEXT_SPLIT_REGEX_H_
#define PAGODA_LIB_TEXT_SPLIT_REGEX_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pagoda {

class SplitRegex {
 public:
  // INVALID_ARGUMENT with PCRE2's message and offset when `pattern` does not compile.
  static absl::StatusOr<std::unique_ptr<SplitRegex>> Compile(const std::string& pattern);
  ~SplitRegex();

  // The pieces of `text` (valid UTF-8): every match, and every non-empty stretch between
  // matches, in order, as byte ranges [begin, end) that together cover the text.
  std::vector<std::pair<size_t, size_t>> Split(absl::string_view text) const;

 private:
  explicit SplitRegex(void* code) : code_(code) {}
  void* const code_;  // pcre2_code_8*, owned
};

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_SPLIT_REGEX_H_
