#include "router/placement.h"

#include <algorithm>

#include "glog/logging.h"

namespace pagoda {

int Placement::NumHintedBlocks(int worker_id, std::span<const uint64_t> prompt_hashes) const {
  int hit = 0;
  for (uint64_t h : prompt_hashes) {
    auto owner = block_owner_.find(h);
    if (owner == block_owner_.end() || owner->second != worker_id) break;
    ++hit;
  }
  return hit;
}

int Placement::Choose(std::span<const WorkerLoad> workers,
                      std::span<const uint64_t> prompt_hashes) {
  CHECK(!workers.empty()) << "placement needs a worker to choose";
  const WorkerLoad* best = &workers.front();
  if (options_.policy == PlacementPolicy::kRoundRobin) {
    best = &workers[next_round_robin_++ % workers.size()];
  } else {
    const double num_blocks = static_cast<double>(prompt_hashes.size());
    const bool prefix_aware = options_.policy == PlacementPolicy::kPrefixAware;
    // The leading blocks some worker was sent (chained: the deepest one sent claims the rest).
    int anywhere = 0;
    if (prefix_aware) {
      for (int i = static_cast<int>(prompt_hashes.size()); i > 0 && anywhere == 0; --i) {
        if (block_owner_.contains(prompt_hashes[i - 1])) anywhere = i;
      }
    }
    double best_cost = 0;
    for (const WorkerLoad& w : workers) {
      const int hit = prefix_aware ? NumHintedBlocks(w.worker_id, prompt_hashes) : 0;
      const int pullable = w.can_pull ? std::max(0, anywhere - hit) : 0;
      // Active blocks, plus a rough share for requests queued there but not yet admitted.
      const double load = w.num_used_blocks + w.num_waiting * (num_blocks + 1);
      const double cost =
          options_.prefix_weight * (num_blocks - hit - pullable + options_.pull_weight * pullable) +
          load;
      if (&w == &workers.front() || cost < best_cost) {
        best = &w;
        best_cost = cost;
      }
    }
  }
  if (num_hints() > options_.max_hints) block_owner_.clear();
  for (uint64_t h : prompt_hashes) block_owner_[h] = best->worker_id;
  return best->worker_id;
}

std::vector<int> Placement::Owners(std::span<const uint64_t> prompt_hashes) const {
  std::vector<int> owners;
  owners.reserve(prompt_hashes.size());
  for (uint64_t h : prompt_hashes) {
    auto owner = block_owner_.find(h);
    owners.push_back(owner == block_owner_.end() ? -1 : owner->second);
  }
  return owners;
}

void Placement::Remember(std::span<const uint64_t> block_hashes, int worker_id) {
  for (uint64_t h : block_hashes) block_owner_[h] = worker_id;
}

void Placement::ForgetWorker(int worker_id) {
  absl::erase_if(block_owner_, [worker_id](const auto& hint) { return hint.second == worker_id; });
}

}  // namespace pagoda
