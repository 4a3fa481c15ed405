// The parser's position in a template's tokens, and its syntax errors: what jinja2's
// TokenStream is to its Parser. The expression and statement parsers read through one cursor.
#ifndef PAGODA_LIB_JINJA_TOKEN_CURSOR_H_
#define PAGODA_LIB_JINJA_TOKEN_CURSOR_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/lexer.h"

namespace pagoda::jinja {

class TokenCursor {
 public:
  // REQUIRES: `tokens` is not empty and ends with a kEnd token (the lexer's output); it must
  // outlive the cursor.
  explicit TokenCursor(const std::vector<Token>& tokens) : tokens_(tokens) {}

  const Token& Cur() const { return tokens_[pos_]; }
  // The token k ahead, or the last (kEnd).
  const Token& Look(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  // Moves to the next token; stays on the last.
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(absl::string_view op) const {
    return Cur().kind == Token::Kind::kOperator && Cur().text == op;
  }
  bool IsName(absl::string_view name) const {
    return Cur().kind == Token::Kind::kName && Cur().text == name;
  }
  // Advances past the operator or name when it is the current token.
  bool SkipOp(absl::string_view op);
  bool SkipName(absl::string_view name);

  // A token as jinja2's messages name it ("end of statement block", an operator's text).
  static std::string Describe(const Token& t);
  // INVALID_ARGUMENT "TemplateSyntaxError: line N: message".
  static absl::Status Error(absl::string_view message, int line);
  absl::Status Unexpected() const;
  // Advances past the expected token, or says what came instead.
  absl::Status ExpectOp(absl::string_view op);
  absl::Status ExpectKind(Token::Kind kind, absl::string_view what);
  absl::StatusOr<std::string> ExpectName();
  absl::Status ExpectBlockEnd() {
    return ExpectKind(Token::Kind::kBlockEnd, "end of statement block");
  }

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_TOKEN_CURSOR_H_
