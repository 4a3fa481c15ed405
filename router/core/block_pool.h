// One worker's KV blocks as the router sees them (vLLM v1's BlockPool): ids 0..num_blocks-1,
// a ref count per block, a free queue in eviction order, and hash -> block for cached full
// blocks. A freed block keeps its hash (and stays a prefix-cache hit) until it is reused.
//
//   free queue (LRU first):  head ⇄ b7 ⇄ b2 ⇄ b9 ⇄ tail      intrusive list, O(1) removal
//
// Thread-compatible: the scheduler that owns it serialises access.
#ifndef PAGODA_ROUTER_CORE_BLOCK_POOL_H_
#define PAGODA_ROUTER_CORE_BLOCK_POOL_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagoda {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Blocks with no reference (cached or not): what Allocate can hand out.
  int num_free_blocks() const { return num_free_; }
  int num_used_blocks() const { return num_blocks() - num_free_; }
  int ref_count(int block) const { return blocks_[block].ref_count; }
  int64_t num_evictions() const { return num_evictions_; }

  // Takes the least recently freed block, forgetting its cached hash. REQUIRES: a free block.
  int Allocate();
  // The cached full block with this hash whose tokens equal `tokens`, or -1.
  int Lookup(uint64_t hash, std::span<const int> tokens) const;
  // Adds a reference; a free (cached) block leaves the free queue.
  void Touch(int block);
  // Drops a reference; at zero the block joins the free queue's tail (evicted last).
  void Release(int block);
  // Records that full `block` holds `tokens` with chained hash `hash`. A hash that another
  // block already caches keeps that block.
  void Cache(int block, uint64_t hash, std::span<const int> tokens);

 private:
  struct Block {
    int ref_count = 0;
    int prev = -1, next = -1;  // free-queue links; -1 = none
    bool in_free_queue = false;
    bool cached = false;
    uint64_t hash = 0;
    std::vector<int> tokens;  // the block's tokens while cached (hits compare them)
  };
  void PushBack(int block);
  void Remove(int block);

  std::vector<Block> blocks_;
  int head_ = -1, tail_ = -1;  // free queue ends
  int num_free_ = 0;
  absl::flat_hash_map<uint64_t, int> cached_;  // hash -> block
  int64_t num_evictions_ = 0;
};

// Chained block hash: H(parent, tokens of the block), XXH3 seeded with the parent's hash.
// Stable across processes and runs (on one byte order: the router's, where it never leaves).
uint64_t HashBlock(uint64_t parent, std::span<const int> tokens);

// The parent of a sequence's first block: the router's secret key (EngineOptions::
// prefix_cache_key), hashed with the request's cache_salt when it has one, so that requests
// share cached blocks only under one salt and nobody can aim a collision at a block's hash;
// then with its LoRA adapter's name when it runs one (issue 39: the same prompt under two
// adapters, or under one and the base, never shares K/V), under another seed than salts', so
// no salt's root is an adapter's.
uint64_t PrefixRoot(uint64_t key, std::string_view salt, std::string_view adapter = {});

// Extends `hashes`, the chained hashes of the first hashes->size() blocks of `tokens`, to its
// first `num_blocks` blocks of `block_size` tokens, the first block's parent being `root`.
// REQUIRES: tokens holds that many full blocks.
void ExtendBlockHashes(std::span<const int> tokens, int block_size, int num_blocks,
                       std::vector<uint64_t>* hashes, uint64_t root = 0);
// The chained hashes of every full block of `tokens`.
std::vector<uint64_t> BlockHashes(std::span<const int> tokens, int block_size, uint64_t root = 0);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_BLOCK_POOL_H_
