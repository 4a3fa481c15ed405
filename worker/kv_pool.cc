#include "worker/kv_pool.h"

#include <algorithm>
#include <cstring>

namespace pagoda {

KvPool::KvPool(const ModelConfig& config, int num_blocks, int block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim) {
  const size_t floats = static_cast<size_t>(num_blocks) * num_kv_heads_ * block_size * head_dim_;
  for (int l = 0; l < config.num_layers; ++l) {
    k_.emplace_back(floats);
    v_.emplace_back(floats);
  }
}

int64_t KvPool::BytesPerBlock(const ModelConfig& config, int block_size) {
  return 2LL * config.num_layers * config.num_kv_heads * block_size * config.head_dim *
         static_cast<int64_t>(sizeof(float));
}

int KvPool::BlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes) {
  return static_cast<int>(std::min<int64_t>(bytes / BytesPerBlock(config, block_size), 1 << 30));
}

void KvPool::Write(int layer, int64_t slot, const float* k_row, const float* v_row) {
  const int64_t block = slot / block_size_, offset = slot % block_size_;
  for (int h = 0; h < num_kv_heads_; ++h) {
    const size_t at = ((block * num_kv_heads_ + h) * block_size_ + offset) * head_dim_;
    std::memcpy(k_[layer].data() + at, k_row + h * head_dim_, head_dim_ * sizeof(float));
    std::memcpy(v_[layer].data() + at, v_row + h * head_dim_, head_dim_ * sizeof(float));
  }
}

void KvPool::CopyBlock(int src, int dst) {
  const size_t block_floats = static_cast<size_t>(num_kv_heads_) * block_size_ * head_dim_;
  for (size_t l = 0; l < k_.size(); ++l) {
    std::memcpy(k_[l].data() + dst * block_floats, k_[l].data() + src * block_floats,
                block_floats * sizeof(float));
    std::memcpy(v_[l].data() + dst * block_floats, v_[l].data() + src * block_floats,
                block_floats * sizeof(float));
  }
}

}  // namespace pagoda
