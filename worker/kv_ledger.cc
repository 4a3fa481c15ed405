#include "worker/kv_ledger.h"

#include <xxhash.h>

#include <algorithm>

namespace pagoda {

KvLedger::KvLedger(int num_blocks, int block_size)
    : block_size_(block_size),
      entries_(num_blocks),
      tokens_(static_cast<size_t>(num_blocks) * block_size) {}

void KvLedger::Wrote(std::span<const int> table, int begin, std::span<const int> tokens,
                     bool offer) {
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int p = begin + static_cast<int>(k);
    const int i = p / block_size_, off = p % block_size_;
    const int b = table[i];
    const int parent = i > 0 ? table[i - 1] : -1;
    Entry& e = entries_[b];
    if (off == 0 && offer) {  // new contents, continuing the sequence's previous block
      e.parent = parent;
      e.parent_generation = parent >= 0 ? entries_[parent].generation : 0;
      e.generation = next_generation_++;
    } else if (!offer || e.filled < 0 || off > e.filled || e.parent != parent) {
      // A gap, unknown earlier offsets or another lineage: nothing here can be vouched for.
      e.filled = -1;
      e.generation = next_generation_++;
      continue;
    } else if (off < e.filled) {  // rewritten (a rejected draft's positions): children stale
      e.generation = next_generation_++;
    }
    tokens_[static_cast<size_t>(b) * block_size_ + off] = tokens[k];
    e.filled = off + 1;
    if (e.filled == block_size_) {
      e.hash =
          ChainHash(e.parent >= 0 ? entries_[e.parent].hash : 0,
                    std::span(tokens_).subspan(static_cast<size_t>(b) * block_size_, block_size_));
    }
  }
}

void KvLedger::Copied(int src, int dst) {
  entries_[dst] = entries_[src];
  entries_[dst].generation = next_generation_++;
  std::copy_n(tokens_.begin() + static_cast<ptrdiff_t>(src) * block_size_, block_size_,
              tokens_.begin() + static_cast<ptrdiff_t>(dst) * block_size_);
}

void KvLedger::Overwritten(int block) {
  entries_[block].filled = -1;
  entries_[block].generation = next_generation_++;
}

uint64_t KvLedger::ChainHash(uint64_t parent_hash, std::span<const int> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_hash);
}

bool KvLedger::Vouch(int b, Vouched* out) const {
  // Up the chain to its first block; a cycle cannot pass more blocks than the pool holds.
  const int n = static_cast<int>(entries_.size());
  int cur = b;
  for (int steps = 0;; ++steps) {
    const Entry& e = entries_[cur];
    if (e.filled != block_size_ || steps >= n) return false;
    if (e.parent < 0) break;
    if (entries_[e.parent].generation != e.parent_generation) return false;
    cur = e.parent;
  }
  const Entry& e = entries_[b];
  out->hash = e.hash;
  out->parent_hash = e.parent >= 0 ? entries_[e.parent].hash : 0;
  out->tokens = std::span(tokens_).subspan(static_cast<size_t>(b) * block_size_, block_size_);
  return true;
}

void KvLedger::Restored(int b, int parent, std::span<const int> tokens, uint64_t hash) {
  Entry& e = entries_[b];
  e.filled = block_size_;
  e.parent = parent;
  e.parent_generation = parent >= 0 ? entries_[parent].generation : 0;
  e.generation = next_generation_++;
  e.hash = hash;
  std::copy_n(tokens.begin(), block_size_,
              tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
}

bool KvLedger::Intact(int b, std::vector<uint8_t>* state) const {
  // Walk up to the first block whose answer is known, then settle the path on the way back.
  std::vector<int> path;
  bool ok = true;
  for (int cur = b;;) {
    if ((*state)[cur] != 0) {
      ok = (*state)[cur] == 1;
      break;
    }
    const Entry& e = entries_[cur];
    if (e.filled != block_size_ || std::find(path.begin(), path.end(), cur) != path.end()) {
      ok = false;
      path.push_back(cur);
      break;
    }
    path.push_back(cur);
    if (e.parent < 0) break;  // a first block: intact
    if (entries_[e.parent].generation != e.parent_generation) {
      ok = false;
      break;
    }
    cur = e.parent;
  }
  // Everything on the path shares the answer: a block is intact when its parent is.
  for (int p : path) (*state)[p] = ok ? 1 : 2;
  return (*state)[b] == 1;
}

std::vector<CachedBlock> KvLedger::Export(int max_blocks) const {
  const int n = static_cast<int>(entries_.size());
  std::vector<uint8_t> state(n, 0);
  std::vector<std::vector<int>> children(n);
  std::vector<int> roots;
  for (int b = 0; b < n; ++b) {
    if (!Intact(b, &state)) continue;
    if (entries_[b].parent < 0) {
      roots.push_back(b);
    } else {
      children[entries_[b].parent].push_back(b);
    }
  }
  // Depth first from each root, so each chain goes whole before the next while room lasts.
  std::vector<CachedBlock> out;
  std::vector<std::pair<int, int>> stack;  // (block, its parent's index in out)
  for (int root : roots) {
    stack.push_back({root, -1});
    while (!stack.empty() && static_cast<int>(out.size()) < max_blocks) {
      const auto [b, parent] = stack.back();
      stack.pop_back();
      const int index = static_cast<int>(out.size());
      CachedBlock& c = out.emplace_back();
      c.block = b;
      c.parent = parent;
      c.tokens.assign(tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_,
                      tokens_.begin() + static_cast<ptrdiff_t>(b + 1) * block_size_);
      for (int child : children[b]) stack.push_back({child, index});
    }
    stack.clear();
    if (static_cast<int>(out.size()) >= max_blocks) break;
  }
  return out;
}

}  // namespace pagoda
