#include "common/grammar/token_masker.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace pagoda {
namespace {

void SetBit(std::span<uint64_t> mask, int id) { mask[id >> 6] |= uint64_t{1} << (id & 63); }
bool HasBit(std::span<const uint64_t> mask, int id) { return (mask[id >> 6] >> (id & 63)) & 1; }

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
      if (taint) {
        for (uint32_t j = i; j < node.end; ++j) {
          for (uint32_t t = nodes[j].tokens_begin; t < nodes[j].tokens_end; ++t) {
            entry->uncertain.push_back(node_tokens[t]);
          }
        }
      }
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
