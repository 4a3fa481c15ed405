#include "lib/jinja/token_cursor.h"

#include "absl/strings/str_cat.h"

namespace pagoda::jinja {

using TK = Token::Kind;

bool TokenCursor::SkipOp(absl::string_view op) {
  if (!IsOp(op)) return false;
  Advance();
  return true;
}

bool TokenCursor::SkipName(absl::string_view name) {
  if (!IsName(name)) return false;
  Advance();
  return true;
}

std::string TokenCursor::Describe(const Token& t) {
  switch (t.kind) {
    case TK::kText:
      return "template data";
    case TK::kVariableBegin:
      return "begin of print statement";
    case TK::kVariableEnd:
      return "end of print statement";
    case TK::kBlockBegin:
      return "begin of statement block";
    case TK::kBlockEnd:
      return "end of statement block";
    case TK::kEnd:
      return "end of template";
    case TK::kString:
      return "string";
    default:
      return t.text;
  }
}

absl::Status TokenCursor::Error(absl::string_view message, int line) {
  return absl::InvalidArgumentError(
      absl::StrCat("TemplateSyntaxError: line ", line, ": ", message));
}

absl::Status TokenCursor::Unexpected() const {
  return Error(absl::StrCat("unexpected '", Describe(Cur()), "'"), Cur().line);
}

absl::Status TokenCursor::ExpectOp(absl::string_view op) {
  if (SkipOp(op)) return absl::OkStatus();
  return Error(absl::StrCat("expected '", op, "', got '", Describe(Cur()), "'"), Cur().line);
}

absl::Status TokenCursor::ExpectKind(TK kind, absl::string_view what) {
  if (Cur().kind != kind) {
    return Error(absl::StrCat("expected ", what, ", got '", Describe(Cur()), "'"), Cur().line);
  }
  Advance();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenCursor::ExpectName() {
  if (Cur().kind != TK::kName) {
    return Error(absl::StrCat("expected a name, got '", Describe(Cur()), "'"), Cur().line);
  }
  std::string name = Cur().text;
  Advance();
  return name;
}

}  // namespace pagoda::jinja
