#include "lib/grammar/token_masker.h"

#include <algorithm>
#include <array>
#include <utility>

#include "common/status_macros.h"

namespace pagoda {
namespace {

void SetBit(std::span<uint64_t> mask, int id) { mask[id >> 6] |= uint64_t{1} << (id & 63); }
bool HasBit(std::span<const uint64_t> mask, int id) { return (mask[id >> 6] >> (id & 63)) & 1; }

// A dead trie node whose path went through a stand-in bottom: the real frames below might
// take the rest of its tokens, so each one of its subtree is checked when a mask is asked for.
void AddSubtree(const TokenVocabulary& v, uint32_t node, std::vector<int32_t>* uncertain) {
  for (uint32_t j = node; j < v.nodes()[node].end; ++j) {
    for (uint32_t t = v.nodes()[j].tokens_begin; t < v.nodes()[j].tokens_end; ++t) {
      uncertain->push_back(v.node_tokens()[t]);
    }
  }
}

}  // namespace

// Adds every token but `token` and EOS (which the grammar's completeness decides): a negated
// token terminal. ORed in, as other stacks may allow `token`.
void TokenMasker::AllBut(int token, std::span<uint64_t> mask) const {
  const int size = vocabulary_->size();
  std::vector<uint64_t> all(mask.size(), ~uint64_t{0});
  if (size % 64 != 0) all.back() = (uint64_t{1} << (size % 64)) - 1;
  auto clear = [&](int id) { all[id >> 6] &= ~(uint64_t{1} << (id & 63)); };
  for (int id : vocabulary_->eos_ids()) clear(id);
  clear(token);
  for (size_t w = 0; w < mask.size(); ++w) mask[w] |= all[w];
}

namespace {

bool HasContext(const std::vector<int32_t>& tops) {
  return std::find(tops.begin(), tops.end(), GrammarMatcher::kContext) != tops.end();
}

}  // namespace

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenVocabulary> vocabulary,
                         TokenMaskerOptions options)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), options_(options) {}

size_t TokenMasker::cached_entries() const {
  absl::MutexLock lock(&mu_);
  return cache_.size();
}

size_t TokenMasker::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cache_bytes_;
}

absl::StatusOr<std::shared_ptr<const TokenMasker::Entry>> TokenMasker::Walk(const Key& key) const {
  if (options_.memo_sets > 0) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Entry> entry, MemoWalk(key));
    if (entry != nullptr) return entry;
  }
  return TruncatingWalk(key);
}

// Most of a trie is read in a handful of grammar states (inside a string every ordinary byte
// leads back to the same stacks), so the stacks after (stacks, byte) are computed once and
// looked up in a 256-entry row per distinct set of stacks: a node then costs an array load
// instead of an Advance. Frames are interned and never dropped, so a set's frame ids stay
// valid for the whole walk. Null (not an error) when the sets or frames pass the memo's
// bounds: the caller walks the old way.
absl::StatusOr<std::shared_ptr<const TokenMasker::Entry>> TokenMasker::MemoWalk(
    const Key& key) const {
  constexpr int kMaxFrames = 1 << 20;
  GrammarMatcher m(grammar_, MatcherLimits{.max_frames = kMaxFrames});
  m.tops_.clear();
  int32_t top = key.back() ? GrammarMatcher::kContext : GrammarMatcher::kComplete;
  for (size_t j = key.size() - 1; j-- > 0;) top = m.Intern(key[j], top);

  std::vector<std::vector<int32_t>> sets;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> set_ids;
  std::vector<std::array<int32_t, 256>> next;  // -1: not computed yet
  std::vector<uint8_t> has_context;
  auto intern = [&](std::vector<int32_t> set) {
    std::sort(set.begin(), set.end());
    auto [it, inserted] = set_ids.try_emplace(set, static_cast<int32_t>(sets.size()));
    if (inserted) {
      has_context.push_back(HasContext(set));
      sets.push_back(std::move(set));
      next.emplace_back().fill(-1);
    }
    return it->second;
  };
  const int32_t kEmpty = intern({});

  auto entry = std::make_shared<Entry>();
  entry->accepted.assign(vocabulary_->mask_words(), 0);
  const auto& nodes = vocabulary_->nodes();
  const auto& node_tokens = vocabulary_->node_tokens();
  const int depths = vocabulary_->max_depth() + 1;
  std::vector<int32_t> at(depths);  // the set of stacks after the node's bytes, per depth
  std::vector<uint8_t> tainted(depths, 0);
  std::vector<int32_t> scratch;
  at[0] = intern({top});
  for (uint32_t i = 0; i < nodes.size();) {
    const TokenVocabulary::Node& node = nodes[i];
    const int d = node.depth;
    const int32_t from = at[d - 1];
    int32_t to = next[from][node.byte];
    if (to < 0) {
      if (!m.Advance(sets[from], node.byte, &scratch)) {
        if (m.frames_.size() > kMaxFrames) return nullptr;
        return m.status_;
      }
      to = intern(scratch);
      if (sets.size() > static_cast<size_t>(options_.memo_sets)) return nullptr;
      next[from][node.byte] = to;
    }
    const bool taint = tainted[d - 1] || has_context[from];
    if (to == kEmpty) {
      if (taint) AddSubtree(*vocabulary_, i, &entry->uncertain);
      i = node.end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      SetBit(entry->accepted, node_tokens[t]);
    }
    tainted[d] = taint;
    at[d] = to;
    ++i;
  }
  return std::shared_ptr<const Entry>(std::move(entry));
}

absl::StatusOr<std::shared_ptr<const TokenMasker::Entry>> TokenMasker::TruncatingWalk(
    const Key& key) const {
  GrammarMatcher m(grammar_);
  m.tops_.clear();
  int32_t top = key.back() ? GrammarMatcher::kContext : GrammarMatcher::kComplete;
  for (size_t j = key.size() - 1; j-- > 0;) top = m.Intern(key[j], top);

  auto entry = std::make_shared<Entry>();
  entry->accepted.assign(vocabulary_->mask_words(), 0);
  const auto& nodes = vocabulary_->nodes();
  const auto& node_tokens = vocabulary_->node_tokens();
  const int depths = vocabulary_->max_depth() + 1;
  // Per depth: the stacks after the node's bytes, the frames they use, whether a stand-in
  // bottom was reached above (the real frames below might take the rest).
  std::vector<std::vector<int32_t>> states(depths);
  std::vector<size_t> marks(depths);
  std::vector<uint8_t> tainted(depths, 0);
  states[0] = {top};
  marks[0] = m.frames_.size();
  for (uint32_t i = 0; i < nodes.size();) {
    const TokenVocabulary::Node& node = nodes[i];
    const int d = node.depth;
    m.Truncate(marks[d - 1]);
    const bool taint = tainted[d - 1] || HasContext(states[d - 1]);
    if (!m.Advance(states[d - 1], node.byte, &states[d])) return m.status_;
    if (states[d].empty()) {
      if (taint) AddSubtree(*vocabulary_, i, &entry->uncertain);
      i = node.end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      SetBit(entry->accepted, node_tokens[t]);
    }
    tainted[d] = taint;
    marks[d] = m.frames_.size();
    ++i;
  }
  return std::shared_ptr<const Entry>(std::move(entry));
}

absl::StatusOr<std::shared_ptr<const TokenMasker::Entry>> TokenMasker::Lookup(const Key& key) {
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  // Walked outside the lock: two sequences may both walk a new key; the first one is kept.
  ASSIGN_OR_RETURN(std::shared_ptr<const Entry> entry, Walk(key));
  const size_t bytes = entry->accepted.size() * 8 + entry->uncertain.size() * 4 + 64;
  absl::MutexLock lock(&mu_);
  if (cache_bytes_ + bytes <= options_.cache_bytes) {
    auto [it, inserted] = cache_.emplace(key, entry);
    if (inserted) cache_bytes_ += bytes;
    return it->second;
  }
  return entry;
}

absl::Status TokenMasker::FillMask(GrammarMatcher& matcher, std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  RETURN_IF_ERROR(matcher.status());
  if (matcher.IsComplete()) {
    for (int id : vocabulary_->eos_ids()) SetBit(mask, id);
  }
  const size_t mark = matcher.frames_.size();
  const std::vector<int32_t> tops = matcher.tops_;
  std::vector<int32_t> cur, next;
  Key key;
  for (int32_t top : tops) {
    if (top <= GrammarMatcher::kContext) continue;
    const Grammar::Element& e = grammar_->elements()[matcher.frames_[top].pos];
    if (e.kind == Grammar::Kind::kToken) {
      SetBit(mask, e.arg);
      continue;
    }
    if (e.kind == Grammar::Kind::kNotToken) {
      AllBut(e.arg, mask);
      continue;
    }
    key.clear();
    int32_t id = top;
    for (int j = 0; j < options_.context_frames && id > GrammarMatcher::kContext; ++j) {
      key.push_back(matcher.frames_[id].pos);
      id = matcher.frames_[id].parent;
    }
    key.push_back(id > GrammarMatcher::kContext ? 1 : 0);
    ASSIGN_OR_RETURN(std::shared_ptr<const Entry> entry, Lookup(key));
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= entry->accepted[w];
    for (int32_t token : entry->uncertain) {
      if (HasBit(mask, token)) continue;
      cur.assign(1, top);
      bool alive = true;
      for (char c : vocabulary_->bytes(token)) {
        if (!matcher.Advance(cur, static_cast<uint8_t>(c), &next)) return matcher.status();
        if (next.empty()) {
          alive = false;
          break;
        }
        std::swap(cur, next);
      }
      if (alive) SetBit(mask, token);
      matcher.Truncate(mark);
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda
