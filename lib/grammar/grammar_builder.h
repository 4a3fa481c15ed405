// Builds a Grammar: rules by name, helper rules for groups, classes and repetitions, and the
// checks a grammar from a request must pass before a matcher runs it (every rule defined, no
// left recursion, every rule derives some finite string, the size limits).
#ifndef PAGODA_LIB_GRAMMAR_GRAMMAR_BUILDER_H_
#define PAGODA_LIB_GRAMMAR_GRAMMAR_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/grammar/grammar.h"

namespace pagoda {

class GrammarBuilder {
 public:
  using Element = Grammar::Element;
  using Sequence = std::vector<Element>;
  using Alternatives = std::vector<Sequence>;
  // Inclusive code point ranges.
  using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  // The rule called `name`, declared on first use (defined later or an error at Build).
  absl::StatusOr<int> RuleId(const std::string& name);
  // Gives rule `rule` its alternatives; INVALID_ARGUMENT when it has some already.
  absl::Status Define(int rule, Alternatives alternatives);
  // A new rule named after `parent`, for a group, a class or a repetition.
  absl::StatusOr<int> AddHelper(const std::string& parent, Alternatives alternatives);

  Element Bytes(const Grammar::ByteSet& set);
  Element Byte(uint8_t byte);
  // The UTF-8 encodings of the code points in `ranges` (or of every other code point when
  // `negated`; surrogates are never characters): one kBytes element for ASCII-only sets, else
  // a helper rule with one alternative per run of byte ranges.
  absl::StatusOr<Element> CodePoints(CodePointRanges ranges, bool negated,
                                     const std::string& parent);
  // `item` repeated min..max times (max < 0: unbounded), as helper rules.
  absl::StatusOr<Sequence> Repeat(const Sequence& item, int min, int max,
                                  const std::string& parent);

  // Checks the rules and returns the grammar that starts at `root`.
  absl::StatusOr<std::shared_ptr<const Grammar>> Build(const std::string& root);

 private:
  absl::Status Count(size_t elements);
  absl::Status CheckRules(const Grammar& g) const;

  GrammarLimits limits_;
  std::vector<std::string> names_;
  std::vector<Alternatives> rules_;
  std::vector<bool> defined_;
  absl::flat_hash_map<std::string, int> ids_;
  std::vector<Grammar::ByteSet> sets_;
  absl::flat_hash_map<std::string, int> set_ids_;  // a set's 32 bytes -> its index
  absl::flat_hash_map<std::string, int> helper_counts_;
  size_t num_elements_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_GRAMMAR_BUILDER_H_
