// Jinja source to tokens, with jinja2's whitespace rules: `{%-`/`-%}` strip, trim_blocks
// (the newline after a block tag goes), lstrip_blocks (blanks before a block tag on its own
// line go), `{%+`/`+%}` opt out. Comments vanish; `{% raw %}` bodies become text.
#ifndef PAGODA_LIB_JINJA_LEXER_H_
#define PAGODA_LIB_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda::jinja {

struct Token {
  enum class Kind {
    kText,           // template data, printed as is
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,
    kString,  // `text` holds the unescaped value
    kInteger,
    kFloat,
    kOperator,
    kEnd,
  };
  Kind kind;
  std::string text;
  int line;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// INVALID_ARGUMENT with the line for an unterminated tag, comment or string, an unknown
// character or unbalanced brackets.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_LEXER_H_
