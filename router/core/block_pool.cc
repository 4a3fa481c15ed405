#include "router/core/block_pool.h"

#include <xxhash.h>

#include <algorithm>

#include "glog/logging.h"

namespace pagoda {

uint64_t HashBlock(uint64_t parent, std::span<const int> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

uint64_t PrefixRoot(uint64_t key, std::string_view salt, std::string_view adapter) {
  const uint64_t root = salt.empty() ? key : XXH3_64bits_withSeed(salt.data(), salt.size(), key);
  // Adapters hash from a seed no salt's root starts from (the golden ratio's bits).
  constexpr uint64_t kAdapterSeed = 0x9e3779b97f4a7c15;
  return adapter.empty()
             ? root
             : XXH3_64bits_withSeed(adapter.data(), adapter.size(), root ^ kAdapterSeed);
}

void ExtendBlockHashes(std::span<const int> tokens, int block_size, int num_blocks,
                       std::vector<uint64_t>* hashes, uint64_t root) {
  CHECK_LE(static_cast<int64_t>(num_blocks) * block_size, static_cast<int64_t>(tokens.size()))
      << "only full blocks are hashed";
  for (int i = static_cast<int>(hashes->size()); i < num_blocks; ++i) {
    hashes->push_back(
        HashBlock(i == 0 ? root : (*hashes)[i - 1], tokens.subspan(i * block_size, block_size)));
  }
}

std::vector<uint64_t> BlockHashes(std::span<const int> tokens, int block_size, uint64_t root) {
  std::vector<uint64_t> hashes;
  ExtendBlockHashes(tokens, block_size, static_cast<int>(tokens.size()) / block_size, &hashes,
                    root);
  return hashes;
}

BlockPool::BlockPool(int num_blocks) : blocks_(num_blocks) {
  CHECK_GT(num_blocks, 0) << "a pool needs blocks";
  for (int b = 0; b < num_blocks; ++b) PushBack(b);
}

void BlockPool::PushBack(int b) {
  Block& block = blocks_[b];
  block.prev = tail_;
  block.next = -1;
  if (tail_ >= 0)
    blocks_[tail_].next = b;
  else
    head_ = b;
  tail_ = b;
  block.in_free_queue = true;
  ++num_free_;
}

void BlockPool::Remove(int b) {
  Block& block = blocks_[b];
  if (block.prev >= 0)
    blocks_[block.prev].next = block.next;
  else
    head_ = block.next;
  if (block.next >= 0)
    blocks_[block.next].prev = block.prev;
  else
    tail_ = block.prev;
  block.prev = block.next = -1;
  block.in_free_queue = false;
  --num_free_;
}

int BlockPool::Allocate() {
  CHECK_GE(head_, 0) << "Allocate on a full pool: callers must ask CanAllocate first";
  const int b = head_;
  Remove(b);
  Block& block = blocks_[b];
  if (block.cached) {
    auto it = cached_.find(block.hash);
    if (it != cached_.end() && it->second == b) cached_.erase(it);
    block.cached = false;
    block.tokens.clear();
    ++num_evictions_;
  }
  block.ref_count = 1;
  return b;
}

int BlockPool::Lookup(uint64_t hash, std::span<const int> tokens) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return -1;
  const Block& block = blocks_[it->second];
  return std::equal(tokens.begin(), tokens.end(), block.tokens.begin(), block.tokens.end())
             ? it->second
             : -1;
}

void BlockPool::Touch(int b) {
  Block& block = blocks_[b];
  if (block.in_free_queue) Remove(b);
  ++block.ref_count;
}

void BlockPool::Release(int b) {
  Block& block = blocks_[b];
  CHECK_GT(block.ref_count, 0) << "block " << b << " released more often than referenced";
  if (--block.ref_count == 0) PushBack(b);
}

void BlockPool::Cache(int b, uint64_t hash, std::span<const int> tokens) {
  Block& block = blocks_[b];
  if (block.cached) return;
  if (!cached_.emplace(hash, b).second) return;  // an equal block is cached already
  block.cached = true;
  block.hash = hash;
  block.tokens.assign(tokens.begin(), tokens.end());
}

}  // namespace pagoda
