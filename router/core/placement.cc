#include "router/core/placement.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "glog/logging.h"

namespace pagoda {

int Placement::NumHintedBlocks(int worker_id, std::span<const uint64_t> prompt_hashes) const {
  int hit = 0;
  for (uint64_t h : prompt_hashes) {
    auto owner = block_owner_.find(h);
    if (owner == block_owner_.end() || !absl::c_linear_search(owner->second, worker_id)) break;
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
  for (uint64_t h : prompt_hashes) Note(h, best->worker_id);
  return best->worker_id;
}

Placement::OwnerList& Placement::Note(uint64_t block_hash, int worker_id) {
  OwnerList& owners = block_owner_[block_hash];
  auto it = absl::c_find(owners, worker_id);
  if (it != owners.end()) {
    owners.erase(it);
  } else if (owners.size() == kMaxOwners) {
    owners.pop_back();  // the least recently sent
  }
  owners.insert(owners.begin(), worker_id);
  return owners;
}

std::vector<Placement::OwnerList> Placement::Owners(std::span<const uint64_t> prompt_hashes) const {
  std::vector<OwnerList> owners;
  owners.reserve(prompt_hashes.size());
  for (uint64_t h : prompt_hashes) {
    auto owner = block_owner_.find(h);
    owners.push_back(owner == block_owner_.end() ? OwnerList() : owner->second);
  }
  return owners;
}

void Placement::Remember(std::span<const uint64_t> block_hashes, int worker_id, int instead_of) {
  for (uint64_t h : block_hashes) {
    OwnerList& owners = Note(h, worker_id);
    owners.erase(std::remove(owners.begin(), owners.end(), instead_of), owners.end());
  }
}

void Placement::ForgetWorker(int worker_id) {
  for (auto& [hash, owners] : block_owner_) {
    owners.erase(std::remove(owners.begin(), owners.end(), worker_id), owners.end());
  }
  absl::erase_if(block_owner_, [](const auto& hint) { return hint.second.empty(); });
}

}  // namespace pagoda
