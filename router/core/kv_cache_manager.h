// Per-sequence block tables over one worker's BlockPool (vLLM v1's KVCacheManager), with the
// prefix cache and copy-on-write for forked sequences. Queries are kept apart from mutations:
// ask CanAllocate / CanAppend, then Allocate / Append. Running out of blocks is a `false`
// answer, never a crash. Thread-compatible.
//
// A table covers the sequence's computed tokens; block i holds positions [i·bs, (i+1)·bs):
//
//   tokens:  | 0 ... 15 | 16 ... 31 | 32 ... 37 ·· |
//   table:   [   b4     ,    b9     ,    b2        ]   full blocks hashed, chained:
//   hashes:  [ H(0, t0..15), H(h0, t16..31) ]         h_i = H(h_{i-1}, tokens of block i)
//
// The caller owns the hashes (a sequence keeps its own, see ExtendBlockHashes) and passes them
// in: each block is hashed once, however often its sequence looks for a prefix.
#ifndef PAGODA_ROUTER_CORE_KV_CACHE_MANAGER_H_
#define PAGODA_ROUTER_CORE_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/executor.h"
#include "common/step.h"
#include "router/core/block_pool.h"

namespace pagoda {

// The cached leading blocks of a token sequence.
struct PrefixHit {
  std::vector<int> blocks;
  int num_tokens(int block_size) const { return static_cast<int>(blocks.size()) * block_size; }
};

class KVCacheManager {
 public:
  KVCacheManager(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  const BlockPool& pool() const { return pool_; }

  // The most leading blocks a prefix hit can cover in `num_tokens` tokens: the full blocks
  // before the one holding the last token.
  int MaxPrefixBlocks(int num_tokens) const {
    return num_tokens > 0 ? (num_tokens - 1) / block_size_ : 0;
  }
  // The longest run of cached full blocks at the start of `tokens`, leaving at least the last
  // token uncovered (its logits are needed, so it is always computed). REQUIRES: `block_hashes`
  // chain at least MaxPrefixBlocks(tokens.size()) blocks.
  PrefixHit FindCachedPrefix(std::span<const int> tokens,
                             std::span<const uint64_t> block_hashes) const;

  // Whether a new sequence with `hit` can get blocks for `num_tokens` computed tokens.
  bool CanAllocate(const PrefixHit& hit, int num_tokens) const;
  // REQUIRES: CanAllocate(hit, num_tokens); `seq` has no table.
  void Allocate(int64_t seq, const PrefixHit& hit, int num_tokens);

  // Whether `seq`, which has `num_computed` tokens, can grow to `num_tokens` (counting a
  // copy-on-write of a shared last block).
  bool CanAppend(int64_t seq, int num_computed, int num_tokens) const;
  // REQUIRES: CanAppend(...). Adds blocks; a shared partial block about to be written is
  // replaced by a fresh copy, reported in `copies`. Returns the index of the first table entry
  // that changed (== old size when only blocks were appended).
  int Append(int64_t seq, int num_computed, int num_tokens, std::vector<BlockCopy>* copies);

  // Releases `seq`'s blocks past those that hold `num_tokens` tokens (a rejected draft's; never
  // cached: CacheFullBlocks covers computed tokens only).
  void Truncate(int64_t seq, int num_tokens);
  // `child` shares every block of `parent`, the partial last one too.
  void Fork(int64_t parent, int64_t child);
  // Releases the table (blocks stay cached until reused). No-op for an unknown sequence.
  void Free(int64_t seq);
  // Registers the full blocks among the first `num_computed` tokens in the prefix cache.
  // REQUIRES: `block_hashes` chain at least those blocks.
  void CacheFullBlocks(int64_t seq, std::span<const int> tokens,
                       std::span<const uint64_t> block_hashes, int num_computed);

  const std::vector<int>& block_table(int64_t seq) const { return tables_.at(seq).blocks; }

  // KV transfers between workers (issue 28). A held block has a reference outside every
  // table: it is neither reused nor written until released.
  // The leading cached full blocks of `tokens` (hashes given for each), held. Unlike
  // FindCachedPrefix it may cover the last token (a peer asks for blocks, not a sequence).
  std::vector<int> HoldCachedPrefix(std::span<const int> tokens,
                                    std::span<const uint64_t> block_hashes);
  // How many leading full blocks of `tokens` are cached here.
  int NumCachedBlocks(std::span<const int> tokens, std::span<const uint64_t> block_hashes) const;
  // The blocks of seq's table that hold its first `num_tokens` tokens, held.
  std::vector<int> HoldTable(int64_t seq, int num_tokens);
  // `n` fresh blocks, held (to receive a pull); empty when fewer are free.
  std::vector<int> HoldFreeBlocks(int n);
  // Registers held full blocks as cached: blocks[i] holds block i of `tokens`.
  void CacheHeldBlocks(std::span<const int> blocks, std::span<const int> tokens,
                       std::span<const uint64_t> block_hashes);
  void Release(std::span<const int> blocks);
  // A waiting sequence's first blocks come from a pull: `hit` (its cached full blocks) plus a
  // held partial block with `tail_tokens` computed tokens, which the table takes over.
  // REQUIRES: CanAllocate(hit + tail, num_tokens).

  void AllocateWithTail(int64_t seq, PrefixHit hit, int tail_block, int num_tokens);

  // Caches the full blocks a worker's pool held when it joined (a previous router's prefix
  // cache), each after its parent, and returns their chained hashes; the first blocks of
  // chains are evicted last. REQUIRES: ValidateCachedBlocks passed; no table exists yet.
  // A chain's first block continues `root` (unsalted requests' PrefixRoot).
  std::vector<uint64_t> Adopt(std::span<const CachedBlock> cached, uint64_t root);

  // Stats: prefix-cache queries and hits, in tokens.
  int64_t num_prefix_query_tokens() const { return num_query_tokens_; }
  int64_t num_prefix_hit_tokens() const { return num_hit_tokens_; }
  void RecordPrefixQuery(int num_tokens, int num_hit);

 private:
  struct Table {
    std::vector<int> blocks;
    int num_cached_blocks = 0;  // leading full blocks already in the prefix cache
  };
  int BlocksFor(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }
  // Whether writing at position `num_computed` needs a copy of a shared block first.
  bool NeedsCopy(const Table& table, int num_computed) const;

  const int block_size_;
  BlockPool pool_;
  absl::flat_hash_map<int64_t, Table> tables_;
  int64_t num_query_tokens_ = 0, num_hit_tokens_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_KV_CACHE_MANAGER_H_
