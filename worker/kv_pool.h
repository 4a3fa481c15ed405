// This worker's shard of the KV cache: `num_blocks` physical blocks of `block_size` token slots,
// for every layer. Block ids are the router's; the worker only reads and writes them.
//
//   K, V of layer l: [num_blocks, num_kv_heads, block_size, head_dim] of dtype
//   slot s = block * block_size + offset  →  K[l][block][h][offset][:]
//   (int8: each [block][h] run ends with its block_size f16 scales, worker/kv_dtype.h)
//
// A 16-bit dtype halves the bytes of a block, so the same memory holds twice the blocks; rows
// are rounded to it as they are written and widened back to f32 by the attention kernel. int8
// keeps (head_dim + 2) / (4 · head_dim) of f32's bytes (0.25 + 1/(2 · head_dim)): each row is
// quantized with its own scale as it is written, and the scales travel inside the block.
// Thread-compatible. Allocated once at start.
#ifndef PAGODA_WORKER_KV_POOL_H_
#define PAGODA_WORKER_KV_POOL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/model/layer_range.h"
#include "common/model/model_config.h"
#include "worker/huge_page_buffer.h"
#include "worker/kv_dtype.h"

namespace pagoda {

// `config` as the K/V pool of a stage holding `layers` sees it: their number of layers.
inline ModelConfig StageKvConfig(ModelConfig config, LayerRange layers) {
  config.num_layers = layers.size();
  return config;
}

class KvPool {
 public:
  // config.num_layers is the layers the pool holds (StageKvConfig for a pipeline stage).
  KvPool(const ModelConfig& config, int num_blocks, int block_size, KvDtype dtype = KvDtype::kF32);

  // How many blocks fit in `bytes` for this model.
  static int BlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes,
                            KvDtype dtype = KvDtype::kF32);
  static int64_t BytesPerBlock(const ModelConfig& config, int block_size,
                               KvDtype dtype = KvDtype::kF32);

  // Layer `layer`'s K and V, for paged attention.
  KvLayerView layer(int layer) const { return {k_[layer].data(), v_[layer].data(), dtype_}; }

  // Writes one token's K and V rows (each (num_kv_heads, head_dim)) into `slot` of `layer`,
  // rounded to the pool's dtype.
  void Write(int layer, int64_t slot, const float* k_row, const float* v_row);
  // Copies every layer's K and V of block `src` into block `dst` (copy-on-write).
  void CopyBlock(int src, int dst);

  // One block of one layer's K or V as bytes, [num_kv_heads] runs of dtype() (scales included):
  // what a KV transfer sends and receives as it is, with no conversion. The mutable view is for
  // a transfer writing a block no step reads meanwhile. REQUIRES: block and layer in range.
  enum class Part { kK, kV };
  std::span<const std::byte> BlockBytes(int block, int layer, Part part) const;
  std::span<std::byte> MutableBlockBytes(int block, int layer, Part part);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_layers() const { return static_cast<int>(k_.size()); }
  int num_kv_heads() const { return num_kv_heads_; }
  int head_dim() const { return head_dim_; }
  KvDtype dtype() const { return dtype_; }
  // Bytes of one block of one layer's K (or V).
  size_t block_bytes() const;

 private:
  std::byte* k_bytes(int layer) { return reinterpret_cast<std::byte*>(k_[layer].data()); }
  std::byte* v_bytes(int layer) { return reinterpret_cast<std::byte*>(v_[layer].data()); }

  int num_blocks_, block_size_, num_kv_heads_, head_dim_;
  KvDtype dtype_;
  // (num_layers) x [num_blocks, kv_heads, bs, head_dim] of dtype_, in float-sized storage.
  std::vector<HugePageBuffer> k_, v_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_KV_POOL_H_
