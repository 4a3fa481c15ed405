#include "worker/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "glog/logging.h"

namespace pagoda {

KvPool::KvPool(const ModelConfig& config, int num_blocks, int block_size, KvDtype dtype)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      dtype_(dtype) {
  const size_t bytes = num_blocks * block_bytes();
  const size_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
  for (int l = 0; l < config.num_layers; ++l) {
    k_.emplace_back(floats);
    v_.emplace_back(floats);
  }
}

int64_t KvPool::BytesPerBlock(const ModelConfig& config, int block_size, KvDtype dtype) {
  return 2LL * config.num_layers * config.num_kv_heads * block_size *
         KvRowBytes(dtype, config.head_dim);
}

int KvPool::BlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes,
                           KvDtype dtype) {
  return static_cast<int>(
      std::min<int64_t>(bytes / BytesPerBlock(config, block_size, dtype), 1 << 30));
}

size_t KvPool::block_bytes() const {
  return static_cast<size_t>(num_kv_heads_) * block_size_ * KvRowBytes(dtype_, head_dim_);
}

void KvPool::Write(int layer, int64_t slot, const float* k_row, const float* v_row) {
  const int64_t block = slot / block_size_, offset = slot % block_size_;
  const size_t run_bytes = static_cast<size_t>(block_size_) * KvRowBytes(dtype_, head_dim_);
  for (int h = 0; h < num_kv_heads_; ++h) {
    const size_t run = (block * num_kv_heads_ + h) * run_bytes;
    WriteKvRow(k_row + h * head_dim_, head_dim_, dtype_, block_size_, offset, k_bytes(layer) + run);
    WriteKvRow(v_row + h * head_dim_, head_dim_, dtype_, block_size_, offset, v_bytes(layer) + run);
  }
}

std::span<std::byte> KvPool::MutableBlockBytes(int block, int layer, Part part) {
  CHECK(block >= 0 && block < num_blocks_ && layer >= 0 && layer < num_layers())
      << "block " << block << " layer " << layer;
  const size_t bytes = block_bytes();
  std::byte* base = part == Part::kK ? k_bytes(layer) : v_bytes(layer);
  return {base + static_cast<size_t>(block) * bytes, bytes};
}

std::span<const std::byte> KvPool::BlockBytes(int block, int layer, Part part) const {
  return const_cast<KvPool*>(this)->MutableBlockBytes(block, layer, part);
}

void KvPool::CopyBlock(int src, int dst) {
  const size_t bytes = block_bytes();
  for (int l = 0; l < static_cast<int>(k_.size()); ++l) {
    std::memcpy(k_bytes(l) + dst * bytes, k_bytes(l) + src * bytes, bytes);
    std::memcpy(v_bytes(l) + dst * bytes, v_bytes(l) + src * bytes, bytes);
  }
}

}  // namespace pagoda
