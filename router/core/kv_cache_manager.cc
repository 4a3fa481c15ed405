#include "router/core/kv_cache_manager.h"

#include <algorithm>

#include "glog/logging.h"

namespace pagoda {

KVCacheManager::KVCacheManager(int num_blocks, int block_size)
    : block_size_(block_size), pool_(num_blocks) {
  CHECK_GT(block_size, 0);
}

PrefixHit KVCacheManager::FindCachedPrefix(std::span<const int> tokens,
                                           std::span<const uint64_t> block_hashes) const {
  PrefixHit hit;
  const int max_blocks = MaxPrefixBlocks(static_cast<int>(tokens.size()));
  CHECK_GE(static_cast<int>(block_hashes.size()), max_blocks) << "hash the blocks first";
  for (int i = 0; i < max_blocks; ++i) {
    const int b = pool_.Lookup(block_hashes[i], tokens.subspan(i * block_size_, block_size_));
    if (b < 0) break;
    hit.blocks.push_back(b);
  }
  return hit;
}

bool KVCacheManager::CanAllocate(const PrefixHit& hit, int num_tokens) const {
  int needed = std::max(0, BlocksFor(num_tokens) - static_cast<int>(hit.blocks.size()));
  for (int b : hit.blocks) needed += pool_.ref_count(b) == 0;  // leaves the free queue
  return needed <= pool_.num_free_blocks();
}

void KVCacheManager::Allocate(int64_t seq, const PrefixHit& hit, int num_tokens) {
  CHECK(!tables_.contains(seq)) << "sequence " << seq << " already has blocks";
  Table& table = tables_[seq];
  for (int b : hit.blocks) pool_.Touch(b);
  table.blocks = hit.blocks;
  table.num_cached_blocks = static_cast<int>(hit.blocks.size());
  while (static_cast<int>(table.blocks.size()) < BlocksFor(num_tokens)) {
    table.blocks.push_back(pool_.Allocate());
  }
}

bool KVCacheManager::NeedsCopy(const Table& table, int num_computed) const {
  const int i = num_computed / block_size_;
  return i < static_cast<int>(table.blocks.size()) && pool_.ref_count(table.blocks[i]) > 1;
}

bool KVCacheManager::CanAppend(int64_t seq, int num_computed, int num_tokens) const {
  const Table& table = tables_.at(seq);
  const int needed = std::max(0, BlocksFor(num_tokens) - static_cast<int>(table.blocks.size())) +
                     (NeedsCopy(table, num_computed) ? 1 : 0);
  return needed <= pool_.num_free_blocks();
}

int KVCacheManager::Append(int64_t seq, int num_computed, int num_tokens,
                           std::vector<BlockCopy>* copies) {
  Table& table = tables_.at(seq);
  int first_changed = static_cast<int>(table.blocks.size());
  if (NeedsCopy(table, num_computed)) {
    const int i = num_computed / block_size_;
    const int shared = table.blocks[i];
    const int fresh = pool_.Allocate();
    copies->push_back({shared, fresh});
    pool_.Release(shared);
    table.blocks[i] = fresh;
    first_changed = i;
  }
  while (static_cast<int>(table.blocks.size()) < BlocksFor(num_tokens)) {
    table.blocks.push_back(pool_.Allocate());
  }
  return first_changed;
}

void KVCacheManager::Truncate(int64_t seq, int num_tokens) {
  Table& table = tables_.at(seq);
  while (static_cast<int>(table.blocks.size()) > BlocksFor(num_tokens)) {
    pool_.Release(table.blocks.back());
    table.blocks.pop_back();
  }
  table.num_cached_blocks = std::min<int>(table.num_cached_blocks, table.blocks.size());
}

void KVCacheManager::Fork(int64_t parent, int64_t child) {
  CHECK(!tables_.contains(child)) << "sequence " << child << " already has blocks";
  Table copy = tables_.at(parent);
  for (int b : copy.blocks) pool_.Touch(b);
  tables_.emplace(child, std::move(copy));
}

void KVCacheManager::Free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // Last blocks first, so a prefix's tail is evicted before its head (which more share).
  const std::vector<int>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.Release(*b);
  tables_.erase(it);
}

void KVCacheManager::CacheFullBlocks(int64_t seq, std::span<const int> tokens,
                                     std::span<const uint64_t> block_hashes, int num_computed) {
  Table& table = tables_.at(seq);
  const int full = std::min<int>(num_computed / block_size_, table.blocks.size());
  CHECK_GE(static_cast<int>(block_hashes.size()), full) << "hash the blocks first";
  for (int i = table.num_cached_blocks; i < full; ++i) {
    pool_.Cache(table.blocks[i], block_hashes[i], tokens.subspan(i * block_size_, block_size_));
  }
  table.num_cached_blocks = std::max(table.num_cached_blocks, full);
}

std::vector<int> KVCacheManager::HoldCachedPrefix(std::span<const int> tokens,
                                                  std::span<const uint64_t> block_hashes) {
  std::vector<int> held;
  const int n = std::min<int>(static_cast<int>(tokens.size()) / block_size_, block_hashes.size());
  for (int i = 0; i < n; ++i) {
    const int b = pool_.Lookup(block_hashes[i], tokens.subspan(i * block_size_, block_size_));
    if (b < 0) break;
    pool_.Touch(b);
    held.push_back(b);
  }
  return held;
}

int KVCacheManager::NumCachedBlocks(std::span<const int> tokens,
                                    std::span<const uint64_t> block_hashes) const {
  const int n = std::min<int>(static_cast<int>(tokens.size()) / block_size_, block_hashes.size());
  int i = 0;
  while (i < n && pool_.Lookup(block_hashes[i], tokens.subspan(i * block_size_, block_size_)) >= 0)
    ++i;
  return i;
}

std::vector<int> KVCacheManager::HoldTable(int64_t seq, int num_tokens) {
  const std::vector<int>& table = tables_.at(seq).blocks;
  std::vector<int> held(table.begin(),
                        table.begin() + std::min<int>(BlocksFor(num_tokens), table.size()));
  for (int b : held) pool_.Touch(b);
  return held;
}

std::vector<int> KVCacheManager::HoldFreeBlocks(int n) {
  std::vector<int> held;
  if (n > pool_.num_free_blocks()) return held;
  for (int i = 0; i < n; ++i) held.push_back(pool_.Allocate());
  return held;
}

void KVCacheManager::CacheHeldBlocks(std::span<const int> blocks, std::span<const int> tokens,
                                     std::span<const uint64_t> block_hashes) {
  CHECK_GE(block_hashes.size(), blocks.size());
  CHECK_GE(tokens.size(), blocks.size() * block_size_);
  for (size_t i = 0; i < blocks.size(); ++i) {
    pool_.Cache(blocks[i], block_hashes[i], tokens.subspan(i * block_size_, block_size_));
  }
}

void KVCacheManager::Release(std::span<const int> blocks) {
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.Release(*b);
}

void KVCacheManager::AllocateWithTail(int64_t seq, PrefixHit hit, int tail_block, int num_tokens) {
  const int num_cached = static_cast<int>(hit.blocks.size());
  hit.blocks.push_back(tail_block);
  Allocate(seq, hit, num_tokens);                  // the table's reference to the tail block ...
  pool_.Release(tail_block);                       // ... replaces the pull's
  tables_.at(seq).num_cached_blocks = num_cached;  // the tail is not full: not cached
}

void KVCacheManager::RecordPrefixQuery(int num_tokens, int num_hit) {
  num_query_tokens_ += num_tokens;
  num_hit_tokens_ += num_hit;
}

std::vector<uint64_t> KVCacheManager::Adopt(std::span<const CachedBlock> cached, uint64_t root) {
  std::vector<uint64_t> hashes(cached.size());
  for (size_t i = 0; i < cached.size(); ++i) {
    const CachedBlock& c = cached[i];
    hashes[i] = HashBlock(c.parent < 0 ? root : hashes[c.parent], c.tokens);
    pool_.Cache(c.block, hashes[i], c.tokens);
  }
  // To the free queue's tail, children first: fresh blocks go before any of these, and a
  // chain's leading blocks (what most prompts share) go last.
  for (size_t i = cached.size(); i-- > 0;) {
    pool_.Touch(cached[i].block);
    pool_.Release(cached[i].block);
  }
  return hashes;
}

}  // namespace pagoda
