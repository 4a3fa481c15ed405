#include "router/core/stage_assembler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda {

std::vector<size_t> StageAssembler::ChainFrom(int from) const {
  // Depth-first over the stages starting at `from`; a model has at most a few hundred layers
  // and a group a handful of stages, and every range moves forward, so it ends.
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const WorkerInfo& w = waiting_[i]->info();
    if (w.layer_begin != from || w.layer_end <= from) continue;
    if (w.layer_end == num_layers_) return {i};
    std::vector<size_t> rest = ChainFrom(w.layer_end);
    if (!rest.empty()) {
      rest.insert(rest.begin(), i);
      return rest;
    }
  }
  return {};
}

std::vector<std::shared_ptr<Executor>> StageAssembler::Join(std::shared_ptr<Executor> stage) {
  absl::MutexLock lock(&mu_);
  waiting_.push_back(std::move(stage));
  const std::vector<size_t> chain = ChainFrom(0);
  std::vector<std::shared_ptr<Executor>> group;
  for (size_t i : chain) group.push_back(waiting_[i]);
  std::erase_if(waiting_, [&group](const std::shared_ptr<Executor>& w) {
    return std::find(group.begin(), group.end(), w) != group.end();
  });
  return group;
}

void StageAssembler::Leave(const Executor* stage) {
  absl::MutexLock lock(&mu_);
  std::erase_if(waiting_, [stage](const std::shared_ptr<Executor>& w) { return w.get() == stage; });
}

std::vector<bool> StageAssembler::Held() const {
  std::vector<bool> held(num_layers_, false);
  for (const std::shared_ptr<Executor>& w : waiting_) {
    const WorkerInfo& info = w->info();
    for (int l = std::max(0, info.layer_begin); l < std::min(num_layers_, info.layer_end); ++l) {
      held[l] = true;
    }
  }
  return held;
}

std::string StageAssembler::Missing() const {
  absl::MutexLock lock(&mu_);
  const std::vector<bool> held = Held();
  std::string out;
  for (int l = 0; l < num_layers_;) {
    if (held[l]) {
      ++l;
      continue;
    }
    int end = l;
    while (end < num_layers_ && !held[end]) ++end;
    absl::StrAppend(&out, out.empty() ? "" : ", ", l, ":", end);
    l = end;
  }
  return out;
}

int StageAssembler::NumMissing() const {
  absl::MutexLock lock(&mu_);
  if (waiting_.empty()) return 0;
  const std::vector<bool> held = Held();
  return static_cast<int>(std::count(held.begin(), held.end(), false));
}

int StageAssembler::num_waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.size());
}

}  // namespace pagoda
