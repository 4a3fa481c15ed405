// What the router's two sides of a KV transfer between workers (issue 28) tell each other:
// the Cluster's orders to an Engine (hold blocks for a peer, pull blocks from one) and what the
// Engine reports back. Plain data.
#ifndef PAGODA_ROUTER_TRANSFER_ORDERS_H_
#define PAGODA_ROUTER_TRANSFER_ORDERS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

// Blocks a request pulls from a peer before it runs: full blocks of its leading tokens (cached
// here, a prefix hit), then optionally the partial block after them (a moved sequence's, which
// its table takes).
struct PullPlan {
  int64_t transfer_id = 0;
  std::string peer_address;     // the peer worker's Hello.kv_transfer_address
  std::vector<int> src_blocks;  // the peer's ids: the full blocks, then the partial one if any
  std::vector<int> tokens;      // the tokens of the full blocks (a whole number of blocks)
  std::vector<uint64_t> block_hashes;  // their chained hashes (HashBlock)
  int tail_tokens = 0;  // > 0: src_blocks ends with a block holding this many further tokens
};

// Blocks held here for a peer to pull.
struct HoldOrder {
  int64_t transfer_id = 0;
  std::vector<int> tokens;  // full blocks of a prefix
  std::vector<uint64_t> block_hashes;
};

// What happened to an engine's transfers since it was last asked.
struct TransferEvents {
  struct Held {
    int64_t transfer_id = 0;
    std::vector<int> blocks;  // held until Release; may be fewer than asked (or none)
  };
  struct Pulled {
    int64_t transfer_id = 0;
    bool started = false;  // false: ended before any byte moved (a local hit, no room, aborted)
    bool ok = false;
    std::string error;
    int num_blocks = 0;  // blocks received
    int num_tokens = 0;  // tokens the request does not compute thanks to them
    int64_t bytes = 0;
    double seconds = 0;
  };
  std::vector<Held> held;
  std::vector<Pulled> pulled;
  bool empty() const { return held.empty() && pulled.empty(); }
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_TRANSFER_ORDERS_H_
