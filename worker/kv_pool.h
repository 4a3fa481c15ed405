// This worker's shard of the KV cache: `num_blocks` physical blocks of `block_size` token slots,
// for every layer. Block ids are the router's; the worker only reads and writes them.
//
//   K, V of layer l: [num_blocks, num_kv_heads, block_size, head_dim]
//   slot s = block * block_size + offset  →  K[l][block][h][offset][:]
//
// Thread-compatible. Allocated once at start.
#ifndef PAGODA_WORKER_KV_POOL_H_
#define PAGODA_WORKER_KV_POOL_H_

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"
#include "worker/huge_page_buffer.h"

namespace pagoda {

class KvPool {
 public:
  KvPool(const ModelConfig& config, int num_blocks, int block_size);

  // How many blocks fit in `bytes` for this model.
  static int BlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes);
  static int64_t BytesPerBlock(const ModelConfig& config, int block_size);

  float* k(int layer) { return k_[layer].data(); }
  float* v(int layer) { return v_[layer].data(); }
  const float* k(int layer) const { return k_[layer].data(); }
  const float* v(int layer) const { return v_[layer].data(); }

  // Writes one token's K and V rows (each (num_kv_heads, head_dim)) into `slot` of `layer`.
  void Write(int layer, int64_t slot, const float* k_row, const float* v_row);
  // Copies every layer's K and V of block `src` into block `dst` (copy-on-write).
  void CopyBlock(int src, int dst);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }

 private:
  int num_blocks_, block_size_, num_kv_heads_, head_dim_;
  std::vector<HugePageBuffer> k_, v_;  // (num_layers) x [num_blocks, kv_heads, bs, head_dim]
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_POOL_H_
