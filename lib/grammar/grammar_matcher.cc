#include "lib/grammar/grammar_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

using Kind = Grammar::Kind;

uint64_t Key(int32_t pos, int32_t parent) {
  return (uint64_t{static_cast<uint32_t>(pos)} << 32) | static_cast<uint32_t>(parent);
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, MatcherLimits limits)
    : grammar_(std::move(grammar)), elements_(grammar_->elements().data()), limits_(limits) {
  frames_ = {{-1, kComplete}, {-1, kContext}};
  for (int32_t alt : grammar_->rules()[grammar_->root()].alternatives) {
    Expand(alt, kComplete, &tops_);
  }
}

int32_t GrammarMatcher::Intern(int32_t pos, int32_t parent) {
  auto [it, inserted] = index_.try_emplace(Key(pos, parent), static_cast<int32_t>(frames_.size()));
  if (inserted) frames_.push_back({pos, parent});
  return it->second;
}

void GrammarMatcher::Expand(int32_t pos, int32_t parent, std::vector<int32_t>* tops) {
  auto add = [tops](int32_t top) {
    if (std::find(tops->begin(), tops->end(), top) == tops->end()) tops->push_back(top);
  };
  work_.clear();
  work_.push_back(pos);
  work_.push_back(parent);
  while (!work_.empty()) {
    parent = work_.back();
    work_.pop_back();
    pos = work_.back();
    work_.pop_back();
    while (true) {
      const Grammar::Element& e = elements_[pos];
      if (e.kind == Kind::kEnd) {  // return to the caller
        if (parent <= kContext) {
          add(parent);
          break;
        }
        pos = frames_[parent].pos;
        parent = frames_[parent].parent;
        continue;
      }
      if (e.kind != Kind::kRule) {  // a terminal
        add(Intern(pos, parent));
        break;
      }
      // A call: the frame returned to, unless the caller's alternative ends here.
      const int32_t back = elements_[pos + 1].kind == Kind::kEnd ? parent : Intern(pos + 1, parent);
      for (int32_t alt : grammar_->rules()[e.arg].alternatives) {
        work_.push_back(alt);
        work_.push_back(back);
      }
      break;
    }
  }
}

bool GrammarMatcher::Advance(const std::vector<int32_t>& from, uint8_t byte,
                             std::vector<int32_t>* to) {
  to->clear();
  for (int32_t top : from) {
    if (top <= kContext) continue;
    const Frame f = frames_[top];
    const Grammar::Element& e = elements_[f.pos];
    if (e.kind == Kind::kBytes && grammar_->Accepts(e.arg, byte)) Expand(f.pos + 1, f.parent, to);
  }
  return WithinLimits(to);
}

bool GrammarMatcher::WithinLimits(std::vector<int32_t>* tops) {
  if (tops->size() > static_cast<size_t>(limits_.max_stacks) ||
      frames_.size() > static_cast<size_t>(limits_.max_frames)) {
    status_ = absl::ResourceExhaustedError(
        absl::StrCat("grammar state too large: ", tops->size(), " stacks, ", frames_.size(),
                     " frames (limits ", limits_.max_stacks, ", ", limits_.max_frames, ")"));
    tops->clear();
    return false;
  }
  return true;
}

void GrammarMatcher::Truncate(size_t size) {
  for (size_t i = size; i < frames_.size(); ++i) {
    index_.erase(Key(frames_[i].pos, frames_[i].parent));
  }
  frames_.resize(size);
}

bool GrammarMatcher::Accept(std::string_view bytes) {
  if (!status_.ok()) return false;
  const size_t mark = frames_.size();
  std::vector<int32_t> cur = tops_;
  for (char c : bytes) {
    if (!Advance(cur, static_cast<uint8_t>(c), &scratch_) || scratch_.empty()) {
      Truncate(mark);
      return false;
    }
    std::swap(cur, scratch_);
  }
  tops_ = std::move(cur);
  if (frames_.size() > 4096 && frames_.size() > 4 * mark) Compact();
  return true;
}

bool GrammarMatcher::AcceptToken(int token, std::string_view bytes) {
  if (!status_.ok()) return false;
  const size_t mark = frames_.size();
  // By its bytes (none for a special token: it must not pass as the empty string).
  std::vector<int32_t> cur;
  if (!bytes.empty()) {
    cur = tops_;
    for (char c : bytes) {
      if (!Advance(cur, static_cast<uint8_t>(c), &scratch_)) {
        Truncate(mark);
        return false;
      }
      std::swap(cur, scratch_);
      if (cur.empty()) break;
    }
  }
  // By its id.
  for (int32_t top : tops_) {
    if (top <= kContext) continue;
    const Frame f = frames_[top];
    const Grammar::Element& e = elements_[f.pos];
    if ((e.kind == Kind::kToken && e.arg == token) ||
        (e.kind == Kind::kNotToken && e.arg != token)) {
      Expand(f.pos + 1, f.parent, &cur);
    }
  }
  if (!WithinLimits(&cur) || cur.empty()) {
    Truncate(mark);
    return false;
  }
  tops_ = std::move(cur);
  if (frames_.size() > 4096 && frames_.size() > 4 * mark) Compact();
  return true;
}

void GrammarMatcher::Compact() {
  std::vector<Frame> old = std::move(frames_);
  frames_ = {old[0], old[1]};
  index_.clear();
  absl::flat_hash_map<int32_t, int32_t> moved = {{kComplete, kComplete}, {kContext, kContext}};
  // Copies a chain bottom first so parents exist before their children.
  auto copy = [&](const int32_t top) {
    std::vector<int32_t> chain;
    for (int32_t id = top; !moved.contains(id); id = old[id].parent) chain.push_back(id);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const int32_t parent = moved[old[*it].parent];
      moved[*it] = Intern(old[*it].pos, parent);
    }
    return moved[top];
  };
  for (int32_t& top : tops_) top = copy(top);
}

bool GrammarMatcher::IsComplete() const {
  return std::find(tops_.begin(), tops_.end(), kComplete) != tops_.end();
}

bool GrammarMatcher::CanContinue() const {
  return std::any_of(tops_.begin(), tops_.end(), [](int32_t t) { return t > kContext; });
}

}  // namespace pagoda
