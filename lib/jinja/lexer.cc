#include "lib/jinja/lexer.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/jinja/text.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// jinja2 normalizes \r\n and \r to \n and drops one trailing newline (keep_trailing_newline
// is off).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's unicode-escape decoding of a string literal's body.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    const auto hex = [&](int digits) -> bool {
      char32_t value = 0;
      for (int k = 1; k <= digits; ++k) {
        if (i + k >= s.size()) return false;
        const char h = s[i + k];
        int d;
        if (IsDigit(h)) {
          d = h - '0';
        } else if (h >= 'a' && h <= 'f') {
          d = h - 'a' + 10;
        } else if (h >= 'A' && h <= 'F') {
          d = h - 'A' + 10;
        } else {
          return false;
        }
        value = value * 16 + d;
      }
      if (value > 0x10FFFF) return false;
      AppendUtf8(value, &out);
      i += digits;
      return true;
    };
    switch (c) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        if (!hex(2)) out += "\\x";
        break;
      case 'u':
        if (!hex(4)) out += "\\u";
        break;
      case 'U':
        if (!hex(8)) out += "\\U";
        break;
      default:
        if (c >= '0' && c <= '7') {
          int value = c - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
            value = value * 8 + (s[++i] - '0');
          }
          AppendUtf8(static_cast<char32_t>(value), &out);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options)
      : src_(std::move(source)), options_(options) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      const size_t at = FindTagStart(pos_);
      if (at == std::string::npos) {
        Emit(Token::Kind::kText, src_.substr(pos_), line_);
        break;
      }
      const char type = src_[at + 1];  // '{', '%' or '#'
      char sign = at + 2 < src_.size() ? src_[at + 2] : '\0';
      if (sign != '-' && sign != '+') sign = '\0';
      std::string text = src_.substr(pos_, at - pos_);
      const int text_line = line_;
      line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      if (sign == '-') {
        text = Strip(text, std::nullopt, false, true);
      } else if (sign != '+' && options_.lstrip_blocks && type != '{') {
        const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
            std::all_of(text.begin() + l_pos, text.end(), IsBlank)) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) Emit(Token::Kind::kText, std::move(text), text_line);
      pos_ = at + 2 + (sign ? 1 : 0);
      line_starting_ = false;
      absl::Status status;
      if (type == '#') {
        status = Comment();
      } else if (type == '%' && IsRawBlock()) {
        status = Raw();
      } else {
        status = Tag(type == '%');
      }
      if (!status.ok()) return status;
    }
    Emit(Token::Kind::kEnd, "", line_);
    return std::move(tokens_);
  }

 private:
  absl::Status Error(absl::string_view message, int line) {
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
  }

  void Emit(Token::Kind kind, std::string text, int line) {
    tokens_.push_back(Token{kind, std::move(text), line});
  }

  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // After a block or comment end: `-` eats all whitespace, else trim_blocks eats one newline.
  void AfterBlockEnd(char sign) {
    if (sign == '-') {
      SkipWhitespace();
    } else if (sign != '+' && options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    }
  }

  void SkipWhitespace() {
    while (pos_ < src_.size()) {
      size_t length = 0;
      const char32_t c = Utf8CodePointAt(src_, pos_, &length);
      if (!IsPythonSpace(c)) break;
      if (c == '\n') ++line_;
      line_starting_ = c == '\n';
      pos_ += length;
    }
  }

  absl::Status Comment() {
    const int start_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return Error("Missing end of comment tag", start_line);
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + end, '\n'));
    const char sign =
        end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    AfterBlockEnd(sign);
    return absl::OkStatus();
  }

  // At `pos_` (after `{%` and its sign): `\s*raw\s*(-)?%}`.
  bool IsRawBlock() const {
    size_t p = pos_;
    while (p < src_.size() && IsBlank(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && IsBlank(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  absl::Status Raw() {
    const int start_line = line_;
    size_t p = src_.find("%}", pos_);
    const bool strip_after_begin = src_[p - 1] == '-';
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + p, '\n'));
    pos_ = p + 2;
    if (strip_after_begin) SkipWhitespace();
    // Find `{%[-+]?\s*endraw\s*[-+]?%}`.
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t q = at + 2;
      char sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      while (q < src_.size() && IsBlank(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && IsBlank(src_[q])) ++q;
      char end_sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (sign == '-') text = Strip(text, std::nullopt, false, true);
      line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + q, '\n'));
      if (!text.empty()) Emit(Token::Kind::kText, std::move(text), start_line);
      pos_ = q + 2;
      AfterBlockEnd(end_sign);
      return absl::OkStatus();
    }
    return Error("Missing end of raw directive", start_line);
  }

  absl::Status Tag(bool block) {
    Emit(block ? Token::Kind::kBlockBegin : Token::Kind::kVariableBegin, "", line_);
    const int start_line = line_;
    std::vector<char> balance;
    while (true) {
      while (pos_ < src_.size() && IsBlank(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        return Error(block ? "unexpected end of template, expected '%}'"
                           : "unexpected end of template, expected '}}'",
                     start_line);
      }
      if (balance.empty() && TryTagEnd(block)) return absl::OkStatus();
      const char c = src_[pos_];
      if (IsDigit(c)) {
        LexNumber();
      } else if (IsNameStart(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Emit(Token::Kind::kName, src_.substr(start, pos_ - start), line_);
      } else if (c == '\'' || c == '"') {
        const int line = line_;
        size_t p = pos_ + 1;
        while (p < src_.size() && src_[p] != c) {
          if (src_[p] == '\\') ++p;
          ++p;
        }
        if (p >= src_.size()) return Error("unterminated string literal", line);
        const std::string body = src_.substr(pos_ + 1, p - pos_ - 1);
        line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
        Emit(Token::Kind::kString, Unescape(body), line);
        pos_ = p + 1;
      } else {
        static const std::string kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                 "/",  "%",  "~",  "(",  ")",  "[",  "]", "{", "}",
                                                 "<",  ">",  "=",  ".",  ":",  "|",  ",", ";"};
        std::string op;
        for (const std::string& candidate : kOperators) {
          if (src_.compare(pos_, candidate.size(), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op.empty()) {
          return Error(absl::StrCat("unexpected char '", std::string(1, c), "'"), line_);
        }
        if (op == "(" || op == "[" || op == "{") {
          balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty()) return Error(absl::StrCat("unexpected '", op, "'"), line_);
          if (balance.back() != op[0]) {
            return Error(absl::StrCat("unexpected '", op, "', expected '",
                                      std::string(1, balance.back()), "'"),
                         line_);
          }
          balance.pop_back();
        }
        Emit(Token::Kind::kOperator, op, line_);
        pos_ += op.size();
      }
    }
  }

  bool TryTagEnd(bool block) {
    const std::string_view end = block ? "%}" : "}}";
    char sign = '\0';
    size_t p = pos_;
    if (src_[p] == '-' || (block && src_[p] == '+')) sign = src_[p++];
    if (src_.compare(p, 2, end) != 0) return false;
    Emit(block ? Token::Kind::kBlockEnd : Token::Kind::kVariableEnd, "", line_);
    pos_ = p + 2;
    if (block) {
      AfterBlockEnd(sign);
    } else if (sign == '-') {
      SkipWhitespace();
    }
    return true;
  }

  void LexNumber() {
    const size_t start = pos_;
    const auto digits = [&] {
      while (pos_ < src_.size() && (IsDigit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    bool is_float = false;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigit(src_[p])) {
        is_float = true;
        pos_ = p;
        digits();
      }
    }
    std::string text = src_.substr(start, pos_ - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Emit(is_float ? Token::Kind::kFloat : Token::Kind::kInteger, std::move(text), line_);
  }

  const std::string src_;
  const LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(NormalizeNewlines(source), options).Run();
}

}  // namespace pagoda::jinja
