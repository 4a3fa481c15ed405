// Which worker a new request goes to (DESIGN §3): pure policy over the load figures it is
// given, so it can be tested without threads or workers. The prefix-aware policy remembers
// which worker was sent which prompt blocks (by chained block hash, HashBlock) and picks the
// lowest
//
//   cost = w · uncached_prompt_blocks + used_blocks + queued · (prompt_blocks + 1)
//
// where "uncached" counts the prompt's blocks from the first one this worker was not sent. A
// block another worker was sent costs a worker that can pull it (issue 28) only pull_weight · w:
// moving K/V costs a fraction of computing it, so load, not the hint, then decides.

// The hints are approximate and never matter for correctness: a worker's own prefix cache
// decides real hits. Thread-compatible: the Cluster calls it under its lock.
#ifndef PAGODA_ROUTER_CORE_PLACEMENT_H_
#define PAGODA_ROUTER_CORE_PLACEMENT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"

namespace pagoda {

enum class PlacementPolicy { kPrefixAware, kRoundRobin, kLeastLoaded };

struct PlacementOptions {
  PlacementPolicy policy = PlacementPolicy::kPrefixAware;
  double prefix_weight = 1.0;  // w in the cost
  double pull_weight = 0.1;    // of w, for a block a worker that can pull it would pull
  // Block hashes remembered at most before they are all forgotten (bounded memory: a hint).
  int max_hints = 1 << 20;
};

// A worker that can take the request, as placement sees it.
struct WorkerLoad {
  int worker_id = 0;
  int64_t num_used_blocks = 0;  // KV blocks its running sequences hold
  int num_waiting = 0;          // requests queued there and not admitted yet
  bool can_pull = false;        // pulls blocks other workers have (KV transfers)
};

class Placement {
 public:
  explicit Placement(const PlacementOptions& options) : options_(options) {}

  // Chooses one of `workers` (REQUIRES: not empty) for a prompt whose full blocks have the
  // chained hashes `prompt_hashes`, and remembers those blocks as the chosen worker's. Ties go
  // to the earliest in `workers`. Returns the chosen worker_id.
  int Choose(std::span<const WorkerLoad> workers, std::span<const uint64_t> prompt_hashes);
  // The workers a block was sent to, the most recent first (at most kMaxOwners).
  static constexpr int kMaxOwners = 4;
  using OwnerList = absl::InlinedVector<int, kMaxOwners>;
  // For each block of `prompt_hashes`, the workers it was sent to (empty: none). Chained
  // hashes make each a claim on the whole prefix up to that block. For KV transfers (issue 28):
  // ask before Choose, which records the chosen worker as every block's.
  std::vector<OwnerList> Owners(std::span<const uint64_t> prompt_hashes) const;
  // Remembers these blocks as `worker_id`'s, first, and no longer as `instead_of`'s (for a
  // pull: its source has them, its destination not until the pull ends).
  void Remember(std::span<const uint64_t> block_hashes, int worker_id, int instead_of = -1);
  // Forgets every block remembered as `worker_id`'s (it left).
  void ForgetWorker(int worker_id);

  int num_hints() const { return static_cast<int>(block_owner_.size()); }

 private:
  // The prompt's leading blocks remembered as `worker_id`'s.
  int NumHintedBlocks(int worker_id, std::span<const uint64_t> prompt_hashes) const;
  // Puts worker_id first in the block's list, which it returns.
  OwnerList& Note(uint64_t block_hash, int worker_id);

  const PlacementOptions options_;
  absl::flat_hash_map<uint64_t, OwnerList> block_owner_;  // chained block hash -> workers
  int64_t next_round_robin_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_PLACEMENT_H_
