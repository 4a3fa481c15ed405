// A context-free grammar over bytes, compiled from GBNF (llama.cpp's grammar format) or from a
// JSON Schema (json_schema.h), for constrained decoding. Immutable once built; share it
// (std::shared_ptr<const Grammar>) between every sequence that uses it.
//
// GBNF's characters are Unicode code points; here every character class is compiled into the
// UTF-8 byte sequences it stands for, so the matcher (grammar_matcher.h) and the token mask
// (token_masker.h) step one byte at a time, as token strings are bytes.
//
// The compiled form, as llama.cpp's: each rule is a list of alternatives, each alternative a
// run of elements in one flat array ending in kEnd:
//
//   elements: [Bytes(s0) Rule(3) End | Bytes(s1) End | End | ...]
//              ^ rule 0, alternative 0  ^ alternative 1 ^ an empty alternative
//
// Repetitions x{m,n} are expanded into helper rules (m copies, then n - m nested optionals),
// so their bound is limited (GrammarLimits) rather than allocated whatever it says.
//
// Token terminals (kToken, kNotToken) match one whole token id, not bytes: a model's special
// tokens (Qwen's <tool_call>, Mistral's [TOOL_CALLS]) have no bytes a byte terminal could
// match, so this is the only way a grammar lets the model write the token it was trained on.
#ifndef PAGODA_LIB_GRAMMAR_GRAMMAR_H_
#define PAGODA_LIB_GRAMMAR_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda {

// Bounds on what a grammar from a request may cost; refused above them, by name.
struct GrammarLimits {
  size_t max_source_bytes = 1 << 20;  // the GBNF text (or the JSON Schema's)
  int max_repetition = 10000;         // the largest m or n in x{m,n}
  int max_elements = 1 << 20;         // after expanding repetitions and classes (8 B each)
  int max_rules = 1 << 16;            // named and helper rules
};

class Grammar {
 public:
  // kToken: the token `arg`; kNotToken: any one token but `arg` (and EOS).
  enum class Kind : uint8_t { kEnd, kBytes, kRule, kToken, kNotToken };
  struct Element {
    Kind kind;
    int32_t arg;  // kBytes: an index into byte_sets(); kRule: a rule index; else a token id
  };
  struct Rule {
    std::string name;                   // helper rules: "<parent>_<n>"
    std::vector<int32_t> alternatives;  // start positions in elements()
  };
  // 256 bits: which bytes a kBytes element accepts.
  using ByteSet = std::array<uint64_t, 4>;

  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  int root() const { return root_; }

  bool Accepts(int32_t set, uint8_t byte) const {
    return (byte_sets_[set][byte >> 6] >> (byte & 63)) & 1;
  }

 private:
  friend class GrammarBuilder;
  std::vector<Element> elements_;
  std::vector<Rule> rules_;
  std::vector<ByteSet> byte_sets_;
  int root_ = 0;
};

// What GBNF's token terminals resolve against: the vocabulary's size (bounds `<[id]>`) and
// the id of the one token a text is (`<text>`; -1 when the text is not exactly one token).
struct GbnfTokens {
  int vocab_size = 0;
  std::function<int(std::string_view)> find;
};

// Parses llama.cpp's GBNF: `name ::= alternatives` rules, "literals" with escapes (\n \r \t
// \" \\ \xXX \uXXXX \UXXXXXXXX), [classes] and [^negated] ones, `.` (any character), (groups),
// `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`, `#` comments; `root` is the start. Token terminals
// `<[id]>` and `<text>` (the token whose text that is), `!<[id]>` and `!<text>` (any other
// token), resolved against `tokens`. INVALID_ARGUMENT naming the line and column, an
// undefined or twice-defined rule, left recursion, a rule that derives no finite string, a
// bound in `limits` that is passed, or a token terminal that names no token (or without
// `tokens`).
absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                         const GrammarLimits& limits = {},
                                                         const GbnfTokens* tokens = nullptr);

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_GRAMMAR_H_
