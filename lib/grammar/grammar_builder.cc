#include "lib/grammar/grammar_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

using Kind = Grammar::Kind;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

void AddByteRange(Grammar::ByteSet* set, int lo, int hi) {
  for (int b = lo; b <= hi; ++b) (*set)[b >> 6] |= uint64_t{1} << (b & 63);
}

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(uint32_t cp, int n, uint8_t* out) {
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = 0x80 | (cp & 0x3F);
  out[0] = n == 1 ? cp : (kLead[n] | cp);
}

// Splits [lo, hi] (code points of one encoded length `n`) into pieces whose encodings are a
// run of independent byte ranges, the way RE2 compiles UTF-8: a piece may span whole
// continuation-byte blocks only.
void SplitUtf8(uint32_t lo, uint32_t hi, int n,
               std::vector<std::vector<std::pair<int, int>>>* out) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      SplitUtf8(lo, lo | m, n, out);
      SplitUtf8((lo | m) + 1, hi, n, out);
      return;
    }
    if ((hi & m) != m) {
      SplitUtf8(lo, (hi & ~m) - 1, n, out);
      SplitUtf8(hi & ~m, hi, n, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, n, a);
  Encode(hi, n, b);
  std::vector<std::pair<int, int>> run;
  for (int i = 0; i < n; ++i) run.push_back({a[i], b[i]});
  out->push_back(std::move(run));
}

}  // namespace

absl::Status GrammarBuilder::Count(size_t elements) {
  num_elements_ += elements;
  if (num_elements_ > static_cast<size_t>(limits_.max_elements)) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar too large: more than ", limits_.max_elements,
                     " elements after expanding repetitions and character classes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> GrammarBuilder::RuleId(const std::string& name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  if (names_.size() >= static_cast<size_t>(limits_.max_rules)) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar has more than ", limits_.max_rules, " rules"));
  }
  const int id = names_.size();
  names_.emplace_back(name);
  rules_.emplace_back();
  defined_.push_back(false);
  ids_.emplace(std::string(name), id);
  return id;
}

absl::Status GrammarBuilder::Define(int rule, Alternatives alternatives) {
  if (defined_[rule]) {
    return absl::InvalidArgumentError(absl::StrCat("rule '", names_[rule], "' defined twice"));
  }
  size_t n = 0;
  for (const Sequence& s : alternatives) n += s.size() + 1;
  RETURN_IF_ERROR(Count(n));
  defined_[rule] = true;
  rules_[rule] = std::move(alternatives);
  return absl::OkStatus();
}

absl::StatusOr<int> GrammarBuilder::AddHelper(const std::string& parent,
                                              Alternatives alternatives) {
  int& count = helper_counts_[parent];
  std::string name;
  do {
    name = absl::StrCat(parent, "_", ++count);
  } while (ids_.contains(name));
  ASSIGN_OR_RETURN(const int id, RuleId(name));
  RETURN_IF_ERROR(Define(id, std::move(alternatives)));
  return id;
}

Grammar::Element GrammarBuilder::Bytes(const Grammar::ByteSet& set) {
  std::string key(reinterpret_cast<const char*>(set.data()), sizeof(set));
  auto [it, inserted] = set_ids_.emplace(std::move(key), static_cast<int>(sets_.size()));
  if (inserted) sets_.push_back(set);
  return {Kind::kBytes, it->second};
}

Grammar::Element GrammarBuilder::Byte(uint8_t byte) {
  Grammar::ByteSet set{};
  AddByteRange(&set, byte, byte);
  return Bytes(set);
}

absl::StatusOr<Grammar::Element> GrammarBuilder::CodePoints(CodePointRanges ranges, bool negated,
                                                            const std::string& parent) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (auto [lo, hi] : ranges) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  if (negated) {
    CodePointRanges inverse;
    uint32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) inverse.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) inverse.push_back({next, kMaxCodePoint});
    merged = std::move(inverse);
  }
  // Surrogates have no UTF-8 encoding; cut them out.
  CodePointRanges valid;
  for (auto [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      valid.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) valid.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) valid.push_back({0xE000, hi});
  }
  Grammar::ByteSet ascii{};
  std::vector<std::vector<std::pair<int, int>>> runs;
  for (auto [lo, hi] : valid) {
    for (int n = 1; n <= 4 && lo <= hi; ++n) {
      const uint32_t top = n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : kMaxCodePoint;
      if (EncodedLength(lo) != n) continue;
      const uint32_t end = std::min(hi, top);
      if (n == 1) {
        AddByteRange(&ascii, lo, end);
      } else {
        SplitUtf8(lo, end, n, &runs);
      }
      lo = end + 1;
    }
  }
  if (runs.empty()) {
    if (ascii == Grammar::ByteSet{}) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty character class in rule '", parent, "'"));
    }
    return Bytes(ascii);
  }
  Alternatives alternatives;
  if (ascii != Grammar::ByteSet{}) alternatives.push_back({Bytes(ascii)});
  for (const auto& run : runs) {
    Sequence s;
    for (auto [lo, hi] : run) {
      Grammar::ByteSet set{};
      AddByteRange(&set, lo, hi);
      s.push_back(Bytes(set));
    }
    alternatives.push_back(std::move(s));
  }
  ASSIGN_OR_RETURN(const int id, AddHelper(parent, std::move(alternatives)));
  return Element{Kind::kRule, id};
}

absl::StatusOr<GrammarBuilder::Sequence> GrammarBuilder::Repeat(const Sequence& item, int min,
                                                                int max,
                                                                const std::string& parent) {
  if (min > limits_.max_repetition || max > limits_.max_repetition) {
    return absl::InvalidArgumentError(absl::StrCat("repetition bound ", std::max(min, max),
                                                   " in rule '", parent, "' exceeds ",
                                                   limits_.max_repetition));
  }
  if (max >= 0 && max < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition {", min, ",", max, "} in rule '", parent, "' has max < min"));
  }
  Element x = item.size() == 1 ? item[0] : Element{};
  if (item.size() != 1) {
    ASSIGN_OR_RETURN(const int id, AddHelper(parent, {item}));
    x = {Kind::kRule, id};
  }
  Sequence out(min, x);
  RETURN_IF_ERROR(Count(min));
  if (max < 0) {  // star ::= x star | ""
    ASSIGN_OR_RETURN(const int star, AddHelper(parent, {}));
    rules_[star] = {{x, {Kind::kRule, star}}, {}};
    RETURN_IF_ERROR(Count(4));
    out.push_back({Kind::kRule, star});
    return out;
  }
  int tail = -1;  // opt_k ::= x opt_{k-1} | ""
  for (int k = 0; k < max - min; ++k) {
    Sequence s = {x};
    if (tail >= 0) s.push_back({Kind::kRule, tail});
    ASSIGN_OR_RETURN(tail, AddHelper(parent, {std::move(s), {}}));
  }
  if (tail >= 0) out.push_back({Kind::kRule, tail});
  return out;
}

absl::Status GrammarBuilder::CheckRules(const Grammar& g) const {
  const int n = g.rules().size();
  const auto& el = g.elements();
  // Nullable and productive (derives a finite string) by fixpoint.
  std::vector<bool> nullable(n, false), productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < n; ++r) {
      for (int32_t p : g.rules()[r].alternatives) {
        bool all_null = true, all_prod = true;
        for (; el[p].kind != Kind::kEnd; ++p) {
          if (el[p].kind != Kind::kRule) {  // a terminal
            all_null = false;
          } else {
            all_null = all_null && nullable[el[p].arg];
            all_prod = all_prod && productive[el[p].arg];
          }
        }
        if (all_null && !nullable[r]) nullable[r] = changed = true;
        if (all_prod && !productive[r]) productive[r] = changed = true;
      }
    }
  }
  // Left recursion: a cycle through rules reachable before any byte. Iterative DFS.
  std::vector<std::vector<int>> left(n);
  for (int r = 0; r < n; ++r) {
    for (int32_t p : g.rules()[r].alternatives) {
      for (; el[p].kind == Kind::kRule; ++p) {
        left[r].push_back(el[p].arg);
        if (!nullable[el[p].arg]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (int start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int, size_t>> path = {{start, 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const int next = left[r][i++];
      if (color[next] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("left recursion in rule '", g.rules()[next].name, "'"));
      }
      if (color[next] == 0) {
        color[next] = 1;
        path.push_back({next, 0});
      }
    }
  }
  // Every rule the root reaches must derive some finite string.
  std::vector<bool> seen(n, false);
  std::vector<int> todo = {g.root()};
  seen[g.root()] = true;
  while (!todo.empty()) {
    const int r = todo.back();
    todo.pop_back();
    if (!productive[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", g.rules()[r].name, "' derives no finite string"));
    }
    for (int32_t p : g.rules()[r].alternatives) {
      for (; el[p].kind != Kind::kEnd; ++p) {
        if (el[p].kind == Kind::kRule && !seen[el[p].arg]) {
          seen[el[p].arg] = true;
          todo.push_back(el[p].arg);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarBuilder::Build(const std::string& root) {
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!defined_[r]) {
      return absl::InvalidArgumentError(absl::StrCat("undefined rule '", names_[r], "'"));
    }
  }
  auto it = ids_.find(root);
  if (it == ids_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar has no '", root, "' rule"));
  }
  auto g = std::make_shared<Grammar>();
  g->root_ = it->second;
  g->byte_sets_ = sets_;
  g->rules_.resize(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    g->rules_[r].name = names_[r];
    for (const Sequence& s : rules_[r]) {
      g->rules_[r].alternatives.push_back(g->elements_.size());
      g->elements_.insert(g->elements_.end(), s.begin(), s.end());
      g->elements_.push_back({Kind::kEnd, 0});
    }
  }
  RETURN_IF_ERROR(CheckRules(*g));
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace pagoda
