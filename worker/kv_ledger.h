// What each block of the worker's KV pool holds, as far as the worker can vouch for it, so that
// a router that (re)connects can use the prefix cache the last one built (issue 38: a router
// restart keeps the cluster's cache). A block's K/V at position p depends on the tokens at
// positions 0..p, so a full block is reusable when the ledger knows its tokens, written in
// order from offset 0, and the block before it in the sequence that wrote it still holds what
// it held then (a generation per block content says so), back to the sequence's first block.
//
//   step writes tokens t at positions [b, e) of table T ──▶ Wrote(T, b, t)
//   copy-on-write src ─▶ dst ──▶ Copied          a pull writes dst ──▶ Overwritten
//   Hello ◀── Export(): full blocks whose whole chain is intact, parents first
//   --kv-cache-dir ◀── Vouch(b): block b's chain hash, before a step overwrites it
//   --kv-cache-dir ──▶ Restored: a block read back at start
//
// Plain C++, thread-compatible: the engine's step thread owns it.
#ifndef PAGODA_WORKER_KV_LEDGER_H_
#define PAGODA_WORKER_KV_LEDGER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/executor.h"

namespace pagoda {

class KvLedger {
 public:
  KvLedger(int num_blocks, int block_size);

  // A step wrote `tokens` at positions [begin, begin + tokens.size()) of a sequence whose block
  // table is `table` (it covers those positions). Unless `offer`, the blocks are never exported
  // (a tenant's, under a cache_salt).
  void Wrote(std::span<const int> table, int begin, std::span<const int> tokens, bool offer = true);
  // Copy-on-write: `dst` now holds what `src` holds.
  void Copied(int src, int dst);
  // Something the ledger cannot read wrote `block` (a KV pull): its contents are unknown.
  void Overwritten(int block);

  // The full blocks whose every block back to their sequence's first is intact, each after its
  // parent, at most `max_blocks` of them (whole chains from their roots first).
  std::vector<CachedBlock> Export(int max_blocks) const;

  // The hash of a block's whole chain: its tokens' under its parent's (0 for a first block).
  // What --kv-cache-dir names a block by; it says nothing across models (the directory keys
  // those apart).
  static uint64_t ChainHash(uint64_t parent_hash, std::span<const int> tokens);

  // What a full, intact block holds (see Export), for writing it out.
  struct Vouched {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;  // 0 for a first block
    std::span<const int> tokens;
  };
  // Whether block b is full and its chain intact; if so fills `out`. O(chain length), no
  // allocation: it runs before a step overwrites a block.
  bool Vouch(int b, Vouched* out) const;

  // Block b now holds `tokens` (block_size of them), whose chain hash is `hash`, after
  // `parent` (-1: a first block), read back from disk. REQUIRES: parent restored first.
  void Restored(int b, int parent, std::span<const int> tokens, uint64_t hash);

 private:
  struct Entry {
    int filled = 0;   // tokens known at offsets [0, filled); -1: unknown contents
    int parent = -1;  // the block before it in its sequence, -1 for a first block
    uint64_t parent_generation = 0;
    uint64_t generation = 0;  // changes whenever the block's contents change
    uint64_t hash = 0;        // ChainHash, set when the block fills
  };
  // Whether block b is full, known and its chain intact (memoised in `state`: 0 unknown,
  // 1 yes, 2 no).
  bool Intact(int b, std::vector<uint8_t>* state) const;

  const int block_size_;
  std::vector<Entry> entries_;
  std::vector<int> tokens_;  // (num_blocks, block_size)
  uint64_t next_generation_ = 1;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_LEDGER_H_
