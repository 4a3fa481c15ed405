#include "lib/grammar/regex_to_gbnf.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr int kMaxDepth = 64;
constexpr int kMaxCount = 10000;

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges Negate(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : Normalize(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

bool Contains(const Ranges& r, uint32_t c) {
  for (auto [lo, hi] : r) {
    if (c >= lo && c <= hi) return true;
  }
  return false;
}

std::string ClassChar(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return std::string(1, static_cast<char>(c));
  }
  if (c < 0x80) return absl::StrFormat("\\x%02X", c);
  if (c < 0x10000) return absl::StrFormat("\\u%04X", c);
  return absl::StrFormat("\\U%08X", c);
}

// The characters of `r` as they appear inside a JSON string: most as themselves, a quote,
// backslash, tab, newline or carriage return as its escape. Other control characters are left
// out (a model has no need to spell them \u00XX inside a pattern).
std::string JsonChars(const Ranges& r) {
  Ranges safe;
  for (auto [lo, hi] : Normalize(r)) {
    for (uint32_t cut : {0x1Fu, uint32_t{'"'}, uint32_t{'\\'}}) {
      if (cut < lo || cut > hi) continue;
      if (cut > lo) safe.push_back({lo, cut - 1});
      lo = cut + 1;
    }
    if (lo <= hi && hi > 0x1F) safe.push_back({std::max<uint32_t>(lo, 0x20), hi});
  }
  std::vector<std::string> alts;
  if (!safe.empty()) {
    std::string cls = "[";
    for (auto [lo, hi] : safe) {
      cls += ClassChar(lo);
      if (hi != lo) absl::StrAppend(&cls, "-", ClassChar(hi));
    }
    alts.push_back(absl::StrCat(cls, "]"));
  }
  static constexpr std::pair<char, const char*> kEscaped[] = {{'"', R"("\\\"")"},
                                                              {'\\', R"("\\\\")"},
                                                              {'\t', R"("\\t")"},
                                                              {'\n', R"("\\n")"},
                                                              {'\r', R"("\\r")"}};
  for (auto [c, gbnf] : kEscaped) {
    if (Contains(r, c)) alts.push_back(gbnf);
  }
  if (alts.empty()) return "";
  return alts.size() == 1 ? alts[0] : absl::StrCat("(", absl::StrJoin(alts, " | "), ")");
}

// The characters of `r` as themselves (a regex over plain text, not inside JSON).
std::string RawChars(const Ranges& r) {
  const Ranges normal = Normalize(r);
  if (normal.empty()) return "";
  std::string cls = "[";
  for (auto [lo, hi] : normal) {
    cls += ClassChar(lo);
    if (hi != lo) absl::StrAppend(&cls, "-", ClassChar(hi));
  }
  return absl::StrCat(cls, "]");
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  RegexParser(std::string_view p, bool json_string) : p_(p), json_string_(json_string) {}

  absl::StatusOr<std::string> Parse() {
    if (Peek() == '^') ++pos_;
    ASSIGN_OR_RETURN(std::string out, ParseAlternatives(0));
    if (Peek() == '$' && pos_ + 1 == p_.size()) ++pos_;
    if (pos_ != p_.size()) return Error("unexpected ')' or '$'");
    return out;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("pattern at offset ", pos_, ": ", std::string(what)));
  }
  std::string Chars(const Ranges& r) const { return json_string_ ? JsonChars(r) : RawChars(r); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }

  absl::StatusOr<std::string> ParseAlternatives(int depth) {
    if (depth > kMaxDepth) return Error("groups nested too deep");
    std::vector<std::string> alts;
    while (true) {
      ASSIGN_OR_RETURN(std::string seq, ParseSequence(depth));
      alts.push_back(seq.empty() ? "\"\"" : seq);
      if (Peek() != '|') break;
      ++pos_;
    }
    return alts.size() == 1 ? alts[0] : absl::StrCat("(", absl::StrJoin(alts, " | "), ")");
  }

  absl::StatusOr<std::string> ParseSequence(int depth) {
    std::vector<std::string> items;
    while (pos_ < p_.size() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && pos_ + 1 == p_.size()) break;
      ASSIGN_OR_RETURN(std::string atom, ParseAtom(depth));
      ASSIGN_OR_RETURN(std::string quantified, ParseQuantifier(std::move(atom)));
      items.push_back(std::move(quantified));
    }
    return absl::StrJoin(items, " ");
  }

  absl::StatusOr<std::string> ParseQuantifier(std::string atom) {
    std::string q;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) return Error("unterminated {m,n}");
      const std::string_view body = p_.substr(pos_ + 1, close - pos_ - 1);
      for (char b : body) {
        if (b != ',' && (b < '0' || b > '9')) return Error("bad {m,n}");
      }
      if (body.empty() || body.size() > 12) return Error("bad {m,n}");
      for (std::string_view n :
           {body.substr(0, body.find(',')), body.find(',') == std::string_view::npos
                                                ? std::string_view()
                                                : body.substr(body.find(',') + 1)}) {
        if (!n.empty() && std::stoll(std::string(n)) > kMaxCount) {
          return Error(absl::StrCat("repetition count over ", kMaxCount));
        }
      }
      q = absl::StrCat("{", std::string(body), "}");
      pos_ = close + 1;
    } else {
      return atom;
    }
    if (Peek() == '?' || Peek() == '+') ++pos_;  // lazy or possessive: the same strings
    return absl::StrCat("(", atom, ")", q);
  }

  absl::StatusOr<std::string> ParseAtom(int depth) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        const char k = Peek(1);
        if (k == '=' || k == '!') return Error("lookahead is not supported");
        if (k == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
          return Error("lookbehind is not supported");
        }
        if (k == ':') {
          pos_ += 2;
        } else if (k == '<' || (k == 'P' && Peek(2) == '<')) {
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ = close + 1;
        } else {
          return Error("unsupported group flag");
        }
      }
      ASSIGN_OR_RETURN(std::string inner, ParseAlternatives(depth + 1));
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      return absl::StrCat("(", inner, ")");
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Chars(Negate({{'\n', '\n'}}));
    }
    if (c == '^' || c == '$') return Error("anchors inside the pattern are not supported");
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("nothing to repeat");
    Ranges r;
    if (c == '\\') {
      ASSIGN_OR_RETURN(r, ParseEscape());
    } else {
      ASSIGN_OR_RETURN(const uint32_t cp, ParseUtf8());
      r = {{cp, cp}};
    }
    std::string out = Chars(r);
    if (out.empty()) return Error("a control character the grammar does not write");
    return out;
  }

  absl::StatusOr<std::string> ParseClass() {
    ++pos_;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    Ranges r;
    bool first = true;
    while (Peek() != ']' || first) {
      if (pos_ >= p_.size()) return Error("unterminated character class");
      first = false;
      Ranges item;
      if (Peek() == '\\') {
        ASSIGN_OR_RETURN(item, ParseEscape());
      } else {
        ASSIGN_OR_RETURN(const uint32_t cp, ParseUtf8());
        item = {{cp, cp}};
      }
      if (Peek() == '-' && Peek(1) != ']' && item.size() == 1 && item[0].first == item[0].second) {
        ++pos_;
        Ranges hi;
        if (Peek() == '\\') {
          ASSIGN_OR_RETURN(hi, ParseEscape());
        } else {
          ASSIGN_OR_RETURN(const uint32_t cp, ParseUtf8());
          hi = {{cp, cp}};
        }
        if (hi.size() != 1 || hi[0].first < item[0].first) return Error("bad class range");
        item[0].second = hi[0].first;
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    ++pos_;
    std::string out = Chars(negated ? Negate(r) : r);
    if (out.empty()) return Error("empty character class");
    return out;
  }

  absl::StatusOr<Ranges> ParseEscape() {
    const char e = Peek(1);
    pos_ += 2;
    switch (e) {
      case 'd':
        return kDigit;
      case 'D':
        return Negate(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return Negate(kWord);
      case 's':
        return kSpace;
      case 'S':
        return Negate(kSpace);
      case 'n':
        return Ranges{{'\n', '\n'}};
      case 't':
        return Ranges{{'\t', '\t'}};
      case 'r':
        return Ranges{{'\r', '\r'}};
      case 'b':
      case 'B':
        pos_ -= 2;
        return Error("word boundaries are not supported");
      case 'u': {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i, ++pos_) {
          const char h = Peek();
          const int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (d < 0) return Error("expected 4 hex digits after \\u");
          v = v * 16 + d;
        }
        return Ranges{{v, v}};
      }
      default:
        if (e >= '1' && e <= '9') {
          pos_ -= 2;
          return Error("backreferences are not supported");
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || !e) {
          pos_ -= 2;
          return Error(absl::StrCat("unsupported escape \\", std::string(1, e)));
        }
        return Ranges{{static_cast<uint8_t>(e), static_cast<uint8_t>(e)}};
    }
  }

  absl::StatusOr<uint32_t> ParseUtf8() {
    const unsigned char c = Peek();
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > p_.size()) return Error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  std::string_view p_;
  bool json_string_;
  size_t pos_ = 0;
};

}  // namespace

std::string GbnfLiteral(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\x%02X", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, bool json_string) {
  if (pattern.size() > 4096) return absl::InvalidArgumentError("pattern over 4096 bytes");
  return RegexParser(pattern, json_string).Parse();
}

}  // namespace pagoda
