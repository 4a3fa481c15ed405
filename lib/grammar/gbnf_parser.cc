// ParseGbnf: a recursive-descent reader of llama.cpp's GBNF (see grammar.h for the syntax).
// Newlines end a rule unless inside parentheses or after `::=` or `|`; a line that starts
// with `|` continues the rule before it.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_builder.h"

namespace pagoda {
namespace {

using Kind = Grammar::Kind;
using Sequence = GrammarBuilder::Sequence;
using Alternatives = GrammarBuilder::Alternatives;

constexpr int kMaxNesting = 128;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits, const GbnfTokens* tokens)
      : text_(text), tokens_(tokens), builder_(limits) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Parse() {
    SkipSpace(true);
    while (pos_ < text_.size()) {
      RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    return builder_.Build("root");
  }

 private:
  absl::Status Error(const std::string& what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("GBNF line ", line, " column ", column, ": ", what));
  }

  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool AtEnd() const { return pos_ >= text_.size(); }

  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  absl::Status ParseRule() {
    const std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    rule_name_ = std::string(name);
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") return Error("expected '::=' after the rule name");
    pos_ += 3;
    SkipSpace(true);
    ASSIGN_OR_RETURN(Alternatives alternatives, ParseAlternatives(0));
    ASSIGN_OR_RETURN(const int id, builder_.RuleId(std::string(name)));
    const absl::Status defined = builder_.Define(id, std::move(alternatives));
    if (!defined.ok()) return Error(std::string(defined.message()));
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') return Error("expected the end of the line");
    return absl::OkStatus();
  }

  absl::StatusOr<Alternatives> ParseAlternatives(int depth) {
    if (depth > kMaxNesting) return Error("groups nested too deep");
    Alternatives out;
    while (true) {
      ASSIGN_OR_RETURN(Sequence s, ParseSequence(depth));
      out.push_back(std::move(s));
      if (depth == 0 && (Peek() == '\n' || Peek() == '\r')) {
        const size_t line_end = pos_;
        SkipSpace(true);
        if (Peek() != '|') pos_ = line_end;
      }
      if (Peek() != '|') return out;
      ++pos_;
      SkipSpace(true);
    }
  }

  absl::StatusOr<Sequence> ParseSequence(int depth) {
    Sequence seq;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      ASSIGN_OR_RETURN(Sequence item, ParseItem(depth));
      seq.insert(seq.end(), item.begin(), item.end());
      SkipSpace(depth > 0);
    }
    return seq;
  }

  absl::StatusOr<Sequence> ParseItem(int depth) {
    Sequence item;
    const char c = Peek();
    if (c == '"') {
      ++pos_;
      while (Peek() != '"') {
        if (AtEnd()) return Error("unterminated string literal");
        ASSIGN_OR_RETURN(const uint32_t cp, ParseChar());
        char utf8[4];
        const int n = EncodeUtf8(cp, utf8);
        for (int i = 0; i < n; ++i) item.push_back(builder_.Byte(utf8[i]));
      }
      ++pos_;
    } else if (c == '[') {
      ++pos_;
      const bool negated = Peek() == '^';
      if (negated) ++pos_;
      GrammarBuilder::CodePointRanges ranges;
      while (Peek() != ']') {
        if (AtEnd()) return Error("unterminated character class");
        ASSIGN_OR_RETURN(const uint32_t lo, ParseChar());
        uint32_t hi = lo;
        if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\0') {
          ++pos_;
          ASSIGN_OR_RETURN(hi, ParseChar());
          if (hi < lo) return Error("character range is out of order");
        }
        ranges.push_back({lo, hi});
      }
      ++pos_;
      auto element = builder_.CodePoints(std::move(ranges), negated, rule_name_);
      if (!element.ok()) return Error(std::string(element.status().message()));
      item.push_back(*element);
    } else if (c == '.') {
      ++pos_;
      ASSIGN_OR_RETURN(const Grammar::Element any, builder_.CodePoints({}, true, rule_name_));
      item.push_back(any);
    } else if (c == '(') {
      ++pos_;
      SkipSpace(true);
      ASSIGN_OR_RETURN(Alternatives group, ParseAlternatives(depth + 1));
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      ASSIGN_OR_RETURN(const int id, builder_.AddHelper(rule_name_, std::move(group)));
      item.push_back({Kind::kRule, id});
    } else if (c == '<' || (c == '!' && Peek(1) == '<')) {
      ASSIGN_OR_RETURN(const Grammar::Element token, ParseToken());
      item.push_back(token);
    } else if (IsNameChar(c)) {
      ASSIGN_OR_RETURN(const int id, builder_.RuleId(std::string(ParseName())));
      item.push_back({Kind::kRule, id});
    } else {
      return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
    return ParsePostfix(std::move(item));
  }

  // `<[id]>` or `<text>`, `!` before either negates: one whole token, by id or by its text.
  absl::StatusOr<Grammar::Element> ParseToken() {
    const size_t start = pos_;
    const bool negated = Peek() == '!';
    if (negated) ++pos_;
    const size_t close = text_.find('>', pos_ + 1);
    const size_t newline = text_.find('\n', pos_);
    if (close == std::string_view::npos || close > newline) {
      return Error("unterminated token: expected '>'");
    }
    const std::string_view spelled = text_.substr(pos_, close + 1 - pos_);  // "<...>"
    const Kind kind = negated ? Kind::kNotToken : Kind::kToken;
    if (tokens_ == nullptr) {
      pos_ = start;
      return Error(absl::StrCat("token ", std::string(spelled), " needs a model's vocabulary"));
    }
    int id = -1;
    if (spelled.size() > 4 && spelled[1] == '[' && spelled[spelled.size() - 2] == ']') {
      int64_t n = 0;
      for (char d : spelled.substr(2, spelled.size() - 4)) {
        if (d < '0' || d > '9')
          return Error(absl::StrCat("bad token id in ", std::string(spelled)));
        n = std::min<int64_t>(n * 10 + (d - '0'), int64_t{1} << 40);
      }
      if (n >= tokens_->vocab_size) {
        return Error(absl::StrCat("token id ", n, " is outside the vocabulary (",
                                  tokens_->vocab_size, " tokens)"));
      }
      id = static_cast<int>(n);
    } else {
      id = tokens_->find ? tokens_->find(spelled) : -1;
      if (id < 0 || id >= tokens_->vocab_size) {
        return Error(
            absl::StrCat("token ", std::string(spelled), " is not one token of the vocabulary"));
      }
    }
    pos_ = close + 1;
    return Grammar::Element{kind, id};
  }

  absl::StatusOr<Sequence> ParsePostfix(Sequence item) {
    int min = 1, max = 1;
    const char c = Peek();
    if (c == '*') {
      min = 0, max = -1;
    } else if (c == '+') {
      max = -1;
    } else if (c == '?') {
      min = 0;
    } else if (c == '{') {
      ++pos_;
      SkipSpace(false);
      min = 0;
      if (Peek() != ',') {
        ASSIGN_OR_RETURN(min, ParseCount());
      }
      SkipSpace(false);
      max = min;
      if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        max = -1;
        if (Peek() != '}') {
          ASSIGN_OR_RETURN(max, ParseCount());
        }
        SkipSpace(false);
      }
      if (Peek() != '}') return Error("expected '}' after a repetition count");
    } else {
      return item;
    }
    ++pos_;
    auto repeated = builder_.Repeat(item, min, max, rule_name_);
    if (!repeated.ok()) return Error(std::string(repeated.status().message()));
    return *std::move(repeated);
  }

  absl::StatusOr<int> ParseCount() {
    const size_t start = pos_;
    int64_t n = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      n = n * 10 + (Peek() - '0');
      if (n > (1 << 30)) return Error("repetition count too large");
      ++pos_;
    }
    if (pos_ == start) return Error("expected a repetition count");
    return static_cast<int>(n);
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  absl::StatusOr<uint32_t> ParseChar() {
    const unsigned char c = Peek();
    if (c == '\\') {
      const char e = Peek(1);
      pos_ += 2;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return e;
        case 'x':
          return ParseHex(2);
        case 'u':
          return ParseHex(4);
        case 'U':
          return ParseHex(8);
        default:
          pos_ -= 2;
          return Error("unknown escape");
      }
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > text_.size()) return Error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const unsigned char cc = text_[pos_ + i];
      if ((cc & 0xC0) != 0x80) return Error("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  absl::StatusOr<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = HexValue(Peek());
      if (d < 0) return Error(absl::StrCat("expected ", digits, " hex digits"));
      v = v * 16 + d;
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error("not a Unicode character");
    return v;
  }

  static int EncodeUtf8(uint32_t cp, char* out) {
    if (cp < 0x80) {
      out[0] = cp;
      return 1;
    }
    const int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<char>(0x80 | (cp & 0x3F));
    out[0] = static_cast<char>(kLead[n] | cp);
    return n;
  }

  std::string_view text_;
  const GbnfTokens* tokens_;
  size_t pos_ = 0;
  std::string rule_name_;
  GrammarBuilder builder_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                         const GrammarLimits& limits,
                                                         const GbnfTokens* tokens) {
  if (text.size() > limits.max_source_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar is ", text.size(), " bytes; the limit is ", limits.max_source_bytes));
  }
  return GbnfParser(text, limits, tokens).Parse();
}

}  // namespace pagoda
