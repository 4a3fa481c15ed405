#include "worker/kv_pool.h"

#include <cstring>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

ModelConfig SmallConfig() {
  ModelConfig c;
  c.num_layers = 3;
  c.num_kv_heads = 2;
  c.head_dim = 12;
  return c;
}

TEST(KvPoolTest, SixteenBitBlocksTakeHalfTheBytesSoTwiceAsManyFit) {
  const ModelConfig c = SmallConfig();
  const int64_t f32 = KvPool::BytesPerBlock(c, 16, KvDtype::kF32);
  EXPECT_EQ(f32, 2LL * 3 * 2 * 16 * 12 * 4);
  EXPECT_EQ(KvPool::BytesPerBlock(c, 16, KvDtype::kBf16), f32 / 2);
  EXPECT_EQ(KvPool::BytesPerBlock(c, 16, KvDtype::kF16), f32 / 2);
  const int64_t bytes = 100 * f32 + 7;
  EXPECT_EQ(KvPool::BlocksForBytes(c, 16, bytes, KvDtype::kF32), 100);
  EXPECT_EQ(KvPool::BlocksForBytes(c, 16, bytes, KvDtype::kBf16), 200);
  EXPECT_EQ(KvPool::BlocksForBytes(c, 16, bytes, KvDtype::kF16), 200);
}

// A block holds its rows' scales: one f16 per (token, KV head) beside head_dim bytes. At the
// 1.1B and 8B shapes' head_dim of 64 and 128 that is 66/128 and 130/256 of bf16's bytes.
TEST(KvPoolTest, AnInt8BlockIsItsBytesAndOneF16ScalePerRow) {
  ModelConfig c = SmallConfig();
  EXPECT_EQ(KvPool::BytesPerBlock(c, 16, KvDtype::kInt8), 2LL * 3 * 2 * 16 * (12 + 2));
  for (int head_dim : {64, 128}) {
    c.head_dim = head_dim;
    EXPECT_EQ(KvPool::BytesPerBlock(c, 16, KvDtype::kInt8) * 2 * head_dim,
              KvPool::BytesPerBlock(c, 16, KvDtype::kBf16) * (head_dim + 2));
    KvPool pool(c, 3, 16, KvDtype::kInt8);
    EXPECT_EQ(pool.block_bytes(), static_cast<size_t>(2) * 16 * (head_dim + 2));
    EXPECT_EQ(pool.BlockBytes(1, 2, KvPool::Part::kV).size(), pool.block_bytes());
  }
}

// The element at (block, head, offset, d) of a layer's K or V, as attention reads it.
float ElementAt(const void* pool, KvDtype dtype, const ModelConfig& c, int block_size, int block,
                int head, int offset, int d) {
  const size_t run = (static_cast<size_t>(block) * c.num_kv_heads + head) * block_size *
                     KvRowBytes(dtype, c.head_dim);
  std::vector<float> row(c.head_dim);
  ReadKvRow(static_cast<const char*>(pool) + run, c.head_dim, dtype, block_size, offset,
            row.data());
  return row[d];
}

// Each head's row of `x` (num_kv_heads, head_dim) as the pool stores it.
std::vector<float> Rounded(const std::vector<float>& x, KvDtype dtype, int head_dim) {
  std::vector<float> out(x.size());
  std::vector<std::byte> run(KvRowBytes(dtype, head_dim));
  for (size_t h = 0; h < x.size() / head_dim; ++h) {
    WriteKvRow(&x[h * head_dim], head_dim, dtype, 1, 0, run.data());
    ReadKvRow(run.data(), head_dim, dtype, 1, 0, &out[h * head_dim]);
  }
  return out;
}

class KvPoolDtypeTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvPoolDtypeTest, WriteRoundsIntoTheSlotAndCopyBlockCopiesEveryLayer) {
  const KvDtype dtype = GetParam();
  const ModelConfig c = SmallConfig();
  const int bs = 4;
  KvPool pool(c, 5, bs, dtype);
  EXPECT_EQ(pool.dtype(), dtype);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int row = c.num_kv_heads * c.head_dim;
  // Layer l, slot 2·bs + 3 (block 2, offset 3): K and V rows of its own.
  std::vector<std::vector<float>> k(c.num_layers, std::vector<float>(row));
  std::vector<std::vector<float>> v = k;
  for (int l = 0; l < c.num_layers; ++l) {
    for (float& x : k[l]) x = normal(rng);
    for (float& x : v[l]) x = normal(rng);
    pool.Write(l, 2 * bs + 3, k[l].data(), v[l].data());
  }
  pool.CopyBlock(2, 4);
  for (int l = 0; l < c.num_layers; ++l) {
    const KvLayerView view = pool.layer(l);
    const std::vector<float> want_k = Rounded(k[l], dtype, c.head_dim);
    const std::vector<float> want_v = Rounded(v[l], dtype, c.head_dim);
    EXPECT_EQ(view.dtype, dtype);
    for (int block : {2, 4}) {
      for (int h = 0; h < c.num_kv_heads; ++h) {
        for (int d = 0; d < c.head_dim; ++d) {
          ASSERT_EQ(ElementAt(view.k, dtype, c, bs, block, h, 3, d), want_k[h * c.head_dim + d])
              << "layer " << l << " block " << block << " head " << h << " d " << d;
          ASSERT_EQ(ElementAt(view.v, dtype, c, bs, block, h, 3, d), want_v[h * c.head_dim + d]);
          // The neighbouring slot is untouched (zero).
          ASSERT_EQ(ElementAt(view.k, dtype, c, bs, block, h, 2, d), 0.0f);
        }
      }
    }
    // Blocks that were neither written nor copied stay zero.
    EXPECT_EQ(ElementAt(view.k, dtype, c, bs, 3, 1, 3, 0), 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvPoolDtypeTest,
                         ::testing::Values(KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16,
                                           KvDtype::kInt8),
                         [](const ::testing::TestParamInfo<KvDtype>& info) {
                           return std::string(KvDtypeName(info.param));
                         });

}  // namespace
}  // namespace pagoda
