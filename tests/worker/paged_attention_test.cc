#include "worker/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/kernels/isa.h"
#include "worker/kv_dtype.h"

namespace pagoda {
namespace {

// Rows of head_dim in x as the pool stores them (rounded, or int8 with its scale), which the
// kernel must then read back exactly: the reference computes with these values.
void RoundRows(std::vector<float>* x, int head_dim, KvDtype dtype) {
  std::vector<std::byte> run(KvRowBytes(dtype, head_dim));
  for (size_t at = 0; at < x->size(); at += head_dim) {
    WriteKvRow(x->data() + at, head_dim, dtype, 1, 0, run.data());
    ReadKvRow(run.data(), head_dim, dtype, 1, 0, x->data() + at);
  }
}

// A pool of `runs` (block, KV head) runs of block_size rows, from floats [runs][block_size][hd].
std::vector<std::byte> PoolOf(const std::vector<float>& floats, int block_size, int head_dim,
                              KvDtype dtype) {
  const size_t run_bytes = static_cast<size_t>(block_size) * KvRowBytes(dtype, head_dim);
  const size_t runs = floats.size() / (static_cast<size_t>(block_size) * head_dim);
  std::vector<std::byte> pool(runs * run_bytes);
  for (size_t r = 0; r < runs; ++r) {
    for (int o = 0; o < block_size; ++o) {
      WriteKvRow(&floats[(r * block_size + o) * head_dim], head_dim, dtype, block_size, o,
                 &pool[r * run_bytes]);
    }
  }
  return pool;
}

// A sequence's K/V kept contiguously for the reference, and scattered over the pool.
struct TestSequence {
  int start_pos = 0, num_rows = 0;
  std::vector<float> k, v;  // (context, kv_heads, head_dim) contiguous
  std::vector<int> block_table;
};

// Whether a sequence's step of `rows` over a `dtype` cache multiplies bf16 pairs (q and p
// rounded to bf16) with these kernels: paged_attention.h says which kernel runs.
bool Bf16Products(const Kernels& kernels, KvDtype dtype, int rows) {
  if (rows >= 64) return dtype != KvDtype::kF32 && kernels.attention_prefill_bf16dot != nullptr;
  return (dtype == KvDtype::kBf16 || dtype == KvDtype::kInt8) &&
         kernels.attention_decode_bf16dot != nullptr;
}

// Whether it multiplies int16 pairs instead (q, and p times V's scales, rounded to int16): an
// int8 cache's decodes where bf16 products are missing. Measured here: errors up to 8e-5 where
// f32's stay under 1e-6.
bool Int16Products(const Kernels& kernels, KvDtype dtype, int rows) {
  return rows < 64 && dtype == KvDtype::kInt8 && kernels.attention_decode_bf16dot == nullptr &&
         kernels.attention_decode_int8 != nullptr;
}

// Plain softmax attention over contiguous K/V: the definition the kernel must match.
void ReferenceAttention(const AttentionShape& s, const TestSequence& seq, const float* q,
                        int q_stride, float* out) {
  const int group = s.num_heads / s.num_kv_heads;
  for (int r = 0; r < seq.num_rows; ++r) {
    const int ctx = seq.start_pos + r + 1;
    for (int h = 0; h < s.num_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q + r * q_stride + h * s.head_dim;
      std::vector<double> scores(ctx);
      double max = -1e30;
      for (int t = 0; t < ctx; ++t) {
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) {
          dot += qv[d] * seq.k[(static_cast<size_t>(t) * s.num_kv_heads + kvh) * s.head_dim + d];
        }
        scores[t] = dot / std::sqrt(static_cast<double>(s.head_dim));
        max = std::max(max, scores[t]);
      }
      double sum = 0;
      for (double& x : scores) sum += (x = std::exp(x - max));
      for (int d = 0; d < s.head_dim; ++d) {
        double acc = 0;
        for (int t = 0; t < ctx; ++t) {
          acc +=
              scores[t] * seq.v[(static_cast<size_t>(t) * s.num_kv_heads + kvh) * s.head_dim + d];
        }
        out[r * s.num_heads * s.head_dim + h * s.head_dim + d] = static_cast<float>(acc / sum);
      }
    }
  }
}

struct Case {
  int group;  // query heads per KV head
  int block_size;
  std::vector<std::pair<int, int>> seqs;  // (start_pos, num_rows)
  int head_dim = 16;
};

class PagedAttentionTest
    : public ::testing::TestWithParam<std::tuple<Case, const Kernels*, KvDtype>> {};

TEST_P(PagedAttentionTest, MatchesContiguousReference) {
  const Case& c = std::get<0>(GetParam());
  const Kernels& kernels = *std::get<1>(GetParam());
  const KvDtype dtype = std::get<2>(GetParam());
  omp_set_num_threads(3);  // more threads than work in some cases: exercises the split
  std::mt19937 rng(1234 + c.group * 7 + c.block_size);
  std::normal_distribution<float> normal;
  AttentionShape shape{.num_heads = 2 * c.group,
                       .num_kv_heads = 2,
                       .head_dim = c.head_dim,
                       .block_size = c.block_size};
  const int q_stride = shape.num_heads * shape.head_dim + 8;  // padded, like the fused QKV rows
  int num_blocks = 0;
  std::vector<TestSequence> seqs;
  for (auto [start, rows] : c.seqs) {
    TestSequence s;
    s.start_pos = start;
    s.num_rows = rows;
    const int ctx = start + rows;
    s.k.resize(static_cast<size_t>(ctx) * shape.num_kv_heads * shape.head_dim);
    s.v.resize(s.k.size());
    // The reference sees what the pool holds: values already rounded to its dtype.
    for (float& x : s.k) x = normal(rng);
    for (float& x : s.v) x = normal(rng);
    RoundRows(&s.k, shape.head_dim, dtype);
    RoundRows(&s.v, shape.head_dim, dtype);
    const int blocks = (ctx + c.block_size - 1) / c.block_size;
    for (int b = 0; b < blocks; ++b) s.block_table.push_back(num_blocks++);
    seqs.push_back(std::move(s));
  }
  // Scatter: shuffle the physical ids so tables are out of order and interleaved.
  std::vector<int> perm(num_blocks + 5);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int pool_blocks = num_blocks + 5;
  const size_t block_floats =
      static_cast<size_t>(shape.num_kv_heads) * c.block_size * shape.head_dim;
  // NaN everywhere no sequence wrote: reading one would poison the output.
  const std::vector<float> nans(pool_blocks * block_floats, NAN);
  std::vector<std::byte> k_pool = PoolOf(nans, c.block_size, shape.head_dim, dtype);
  std::vector<std::byte> v_pool = k_pool;
  const size_t run_bytes = static_cast<size_t>(c.block_size) * KvRowBytes(dtype, shape.head_dim);
  for (TestSequence& s : seqs) {
    for (int& b : s.block_table) b = perm[b];
    for (int t = 0; t < s.start_pos + s.num_rows; ++t) {
      for (int h = 0; h < shape.num_kv_heads; ++h) {
        const size_t run =
            (s.block_table[t / c.block_size] * static_cast<size_t>(shape.num_kv_heads) + h) *
            run_bytes;
        const size_t src = (static_cast<size_t>(t) * shape.num_kv_heads + h) * shape.head_dim;
        WriteKvRow(&s.k[src], shape.head_dim, dtype, c.block_size, t % c.block_size, &k_pool[run]);
        WriteKvRow(&s.v[src], shape.head_dim, dtype, c.block_size, t % c.block_size, &v_pool[run]);
      }
    }
  }
  int total_rows = 0;
  std::vector<AttentionSequence> attention;
  for (const TestSequence& s : seqs) {
    attention.push_back({total_rows, s.num_rows, s.start_pos, s.block_table.data()});
    total_rows += s.num_rows;
  }
  std::vector<float> q(static_cast<size_t>(total_rows) * q_stride);
  for (float& x : q) x = normal(rng);
  const int out_width = shape.num_heads * shape.head_dim;
  std::vector<float> out(static_cast<size_t>(total_rows) * out_width, NAN);
  PagedAttention(kernels, shape, attention, q.data(), q_stride,
                 {k_pool.data(), v_pool.data(), dtype}, out.data());

  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> ref(static_cast<size_t>(seqs[i].num_rows) * out_width);
    ReferenceAttention(shape, seqs[i], &q[attention[i].first_row * q_stride], q_stride, ref.data());
    float max_err = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      max_err = std::max(max_err, std::abs(ref[j] - out[attention[i].first_row * out_width + j]));
    }
    // A step may multiply bf16 pairs, q and p rounded to bf16 (8 bits of mantissa) before the
    // products: a prefill chunk over a cache in fewer than 32 bits, another over bf16 or int8;
    // or int16 pairs (15 bits).
    const bool bf16_products = Bf16Products(kernels, dtype, seqs[i].num_rows);
    EXPECT_LT(max_err, bf16_products                                     ? 2e-2
                       : Int16Products(kernels, dtype, seqs[i].num_rows) ? 5e-4
                                                                         : 1e-4)
        << "sequence " << i << " start " << seqs[i].start_pos << " rows " << seqs[i].num_rows << " "
        << kernels.name << " " << KvDtypeName(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionTest,
    ::testing::Combine(
        ::testing::Values(
            // Decodes only, MHA, positions crossing block boundaries.
            Case{1, 16, {{0, 1}, {15, 1}, {16, 1}, {47, 1}, {100, 1}}},
            // Mixed prefill chunks and decodes, GQA 2.
            Case{2, 16, {{0, 37}, {5, 1}, {16, 16}, {31, 2}, {64, 20}}},
            // GQA 4, small blocks, chunks that start mid-block.
            Case{4, 4, {{3, 9}, {0, 1}, {13, 1}, {7, 30}}},
            // GQA 4, chunk longer than the 16-row tile, large block.
            Case{4, 32, {{0, 70}, {50, 3}, {200, 1}}},
            // Block size 1: every token its own block.
            Case{2, 1, {{0, 5}, {9, 2}}},
            // Head size 64 (the real models'), a long context.
            Case{2, 16, {{0, 20}, {300, 1}, {40, 3}}, 64},
            // Head size 8 (stories260K): narrower than a vector.
            Case{1, 16, {{0, 9}, {20, 1}}, 8},
            // Head sizes no vector width divides, or only AVX2's: the
            // element-wise tails, in partial blocks.
            Case{2, 16, {{0, 19}, {33, 1}, {5, 4}}, 20}, Case{1, 8, {{0, 11}, {17, 1}}, 24},
            // A lone long decode, and a lone chunk deep in a context: fewer
            // (sequence, KV head) items than the 3 threads, so their blocks are
            // split between threads and merged.
            Case{4, 16, {{2000, 1}}, 64}, Case{2, 16, {{1100, 5}}, 64},
            // Prefill chunks of 64 rows or more (the prefill kernel, rows in
            // lanes) beside decodes: from position 0, mid-block deep in a
            // context, head sizes 8, 20 and 128, GQA 1-8, blocks of 8 and 16.
            Case{2, 16, {{0, 64}, {5, 1}, {100, 80}}, 64}, Case{1, 16, {{0, 67}, {3, 65}}, 8},
            Case{2, 8, {{0, 66}, {9, 70}, {30, 2}}, 20}, Case{8, 16, {{1000, 64}, {7, 1}}, 128}),
        ::testing::ValuesIn(SupportedKernels()),
        ::testing::Values(KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16, KvDtype::kInt8)));

// A long context split across threads gives what one thread (no split) gives, up to rounding.
TEST(PagedAttentionSplitTest, SplitContextMatchesOneThread) {
  const AttentionShape shape{.num_heads = 8, .num_kv_heads = 1, .head_dim = 64, .block_size = 16};
  const int ctx = 4000, blocks = (ctx + shape.block_size - 1) / shape.block_size;
  const size_t block_floats = static_cast<size_t>(shape.block_size) * shape.head_dim;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> k(blocks * block_floats), v(k.size());
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<int> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const AttentionSequence seq{0, 1, ctx - 1, table.data()};
  std::vector<float> q(shape.num_heads * shape.head_dim);
  for (float& x : q) x = normal(rng);
  for (const Kernels* kernels : SupportedKernels()) {
    std::vector<float> one(q.size(), NAN), split(q.size(), NAN);
    omp_set_num_threads(1);
    PagedAttention(*kernels, shape, std::span(&seq, 1), q.data(), 0, {k.data(), v.data()},
                   one.data());
    omp_set_num_threads(8);  // one item, 8 threads: split into 7 parts of 35-36 blocks
    PagedAttention(*kernels, shape, std::span(&seq, 1), q.data(), 0, {k.data(), v.data()},
                   split.data());
    for (size_t i = 0; i < q.size(); ++i) {
      ASSERT_NEAR(one[i], split[i], 1e-5) << i << " " << kernels->name;
    }
    EXPECT_NE(std::memcmp(one.data(), split.data(), q.size() * sizeof(float)), 0)
        << "not split: the test covers nothing";
  }
}

// The pools of a random sequence of `ctx` tokens in shuffled blocks, and its table.
struct RandomContext {
  std::vector<float> k, v;
  std::vector<int> table;
};
RandomContext MakeContext(const AttentionShape& shape, int ctx, uint32_t seed) {
  const int blocks = (ctx + shape.block_size - 1) / shape.block_size;
  const size_t block_floats =
      static_cast<size_t>(shape.num_kv_heads) * shape.block_size * shape.head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  RandomContext c;
  c.k.resize(blocks * block_floats);
  c.v.resize(c.k.size());
  for (float& x : c.k) x = normal(rng);
  for (float& x : c.v) x = normal(rng);
  c.table.resize(blocks);
  std::iota(c.table.begin(), c.table.end(), 0);
  std::shuffle(c.table.begin(), c.table.end(), rng);
  return c;
}

// The outputs of `rows` rows from position `start` of the context, in one step, over the
// context stored as `dtype`.
std::vector<float> Step(const Kernels& kernels, const AttentionShape& shape, const RandomContext& c,
                        const std::vector<float>& q, int start, int rows,
                        KvDtype dtype = KvDtype::kF32) {
  const int width = shape.num_heads * shape.head_dim;
  std::vector<float> out(static_cast<size_t>(rows) * width, NAN);
  const AttentionSequence seq{0, rows, start, c.table.data()};
  const std::vector<std::byte> k = PoolOf(c.k, shape.block_size, shape.head_dim, dtype);
  const std::vector<std::byte> v = PoolOf(c.v, shape.block_size, shape.head_dim, dtype);
  PagedAttention(kernels, shape, std::span(&seq, 1), &q[static_cast<size_t>(start) * width], width,
                 {k.data(), v.data(), dtype}, out.data());
  return out;
}

// A prefill chunk's rows are the same bits however the prompt is cut into chunks (of 64 rows or
// more: the prefill kernel), and a verification's rows (up to 33: kMaxDraftTokens drafts and the
// last token) are the same bits as the decodes they check.
TEST(PagedAttentionStepTest, RowsDoNotDependOnTheStepThatHoldsThem) {
  const AttentionShape shape{.num_heads = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16};
  const int ctx = 300, width = shape.num_heads * shape.head_dim;
  const RandomContext c = MakeContext(shape, ctx, 5);
  std::vector<float> q(static_cast<size_t>(ctx) * width);
  std::mt19937 rng(6);
  std::normal_distribution<float> normal;
  for (float& x : q) x = normal(rng);
  omp_set_num_threads(2);
  for (const Kernels* kernels : SupportedKernels()) {
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kInt8}) {
      const std::string what = absl::StrCat(kernels->name, " ", KvDtypeName(dtype));
      // Rows 150..229 as part of a 230-row chunk from 0, and as an 80-row chunk of their own.
      const std::vector<float> whole = Step(*kernels, shape, c, q, 0, 230, dtype);
      const std::vector<float> chunk = Step(*kernels, shape, c, q, 150, 80, dtype);
      EXPECT_EQ(std::memcmp(&whole[150 * width], chunk.data(), chunk.size() * sizeof(float)), 0)
          << what;
      // Rows 260..292 as one 33-row verification, and one decode at a time.
      const std::vector<float> verify = Step(*kernels, shape, c, q, 260, 33, dtype);
      for (int r = 0; r < 33; ++r) {
        const std::vector<float> decode = Step(*kernels, shape, c, q, 260 + r, 1, dtype);
        ASSERT_EQ(std::memcmp(&verify[r * width], decode.data(), width * sizeof(float)), 0)
            << what << " row " << r;
      }
    }
  }
}

// A deep prefill chunk whose tiles are fewer than the threads is split across them too.
TEST(PagedAttentionSplitTest, SplitPrefillChunkMatchesOneThread) {
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 1, .head_dim = 64, .block_size = 16};
  const int ctx = 4000, rows = 64, width = shape.num_heads * shape.head_dim;
  const RandomContext c = MakeContext(shape, ctx, 8);
  std::vector<float> q(static_cast<size_t>(ctx) * width);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  for (float& x : q) x = normal(rng);
  for (const Kernels* kernels : SupportedKernels()) {
    omp_set_num_threads(1);
    const std::vector<float> one = Step(*kernels, shape, c, q, ctx - rows, rows);
    omp_set_num_threads(16);  // 4 tiles, 16 threads: each split into parts
    const std::vector<float> split = Step(*kernels, shape, c, q, ctx - rows, rows);
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_NEAR(one[i], split[i], 1e-5) << i << " " << kernels->name;
    }
    EXPECT_NE(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)), 0)
        << "not split: the test covers nothing";
  }
}

// Sequences whose tables begin with the same blocks (a system prompt in the prefix cache, the
// n samples of one prompt) read those blocks once for all of them. The result must be exactly,
// bit for bit, what each sequence gets alone, and match the reference.
class SharedPrefixTest : public ::testing::TestWithParam<std::tuple<const Kernels*, KvDtype>> {};

TEST_P(SharedPrefixTest, SharedBlocksGiveExactlyWhatEachSequenceGetsAlone) {
  const Kernels& kernels = *std::get<0>(GetParam());
  const KvDtype dtype = std::get<1>(GetParam());
  omp_set_num_threads(3);
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 64, .block_size = 16};
  const int bs = shape.block_size, pool_blocks = 64;
  const size_t block_floats = static_cast<size_t>(shape.num_kv_heads) * bs * shape.head_dim;
  // The pool as floats (already rounded to its dtype) and as stored.
  std::mt19937 rng(99);
  std::normal_distribution<float> normal;
  std::vector<float> k_floats(pool_blocks * block_floats), v_floats(k_floats.size());
  for (float& x : k_floats) x = normal(rng);
  for (float& x : v_floats) x = normal(rng);
  RoundRows(&k_floats, shape.head_dim, dtype);
  RoundRows(&v_floats, shape.head_dim, dtype);
  const std::vector<std::byte> k_pool = PoolOf(k_floats, bs, shape.head_dim, dtype);
  const std::vector<std::byte> v_pool = PoolOf(v_floats, bs, shape.head_dim, dtype);

  // Blocks 40, 41, 42 hold a 48-token prompt; 50 and 51 another one of 32 tokens.
  struct Seq {
    int start_pos, num_rows;
    std::vector<int> table;
  };
  const std::vector<Seq> seqs = {
      {60, 1, {40, 41, 42, 3}},     // decodes after the 3 shared blocks
      {48, 1, {40, 41, 42, 4}},     // its first own token starts block 3
      {50, 5, {40, 41, 42, 5}},     // a prefill chunk after them
      {30, 1, {40, 6}},             // shares only the first block
      {20, 12, {40, 7}},            // a chunk writing block 1: shares block 0 only
      {70, 1, {8, 9, 10, 11, 12}},  // shares nothing
      {33, 1, {50, 51, 13}},        // a second prompt, two samples of it
      {40, 3, {50, 51, 14}},
      {5, 1, {15}},  // one partial block
  };
  std::vector<AttentionSequence> attention;
  int total_rows = 0;
  for (const Seq& seq : seqs) {
    attention.push_back({total_rows, seq.num_rows, seq.start_pos, seq.table.data()});
    total_rows += seq.num_rows;
  }
  const int q_stride = shape.num_heads * shape.head_dim + 8;
  std::vector<float> q(static_cast<size_t>(total_rows) * q_stride);
  for (float& x : q) x = normal(rng);
  const int out_width = shape.num_heads * shape.head_dim;
  const KvLayerView kv{k_pool.data(), v_pool.data(), dtype};
  std::vector<float> together(static_cast<size_t>(total_rows) * out_width, NAN);
  PagedAttention(kernels, shape, attention, q.data(), q_stride, kv, together.data());

  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> alone(static_cast<size_t>(total_rows) * out_width, NAN);
    PagedAttention(kernels, shape, std::span(&attention[i], 1), q.data(), q_stride, kv,
                   alone.data());
    const size_t at = static_cast<size_t>(attention[i].first_row) * out_width;
    const size_t n = static_cast<size_t>(seqs[i].num_rows) * out_width;
    EXPECT_EQ(std::memcmp(&together[at], &alone[at], n * sizeof(float)), 0)
        << "sequence " << i << " " << kernels.name << " " << KvDtypeName(dtype);

    TestSequence ref_seq;
    ref_seq.start_pos = seqs[i].start_pos;
    ref_seq.num_rows = seqs[i].num_rows;
    for (int t = 0; t < seqs[i].start_pos + seqs[i].num_rows; ++t) {
      for (int h = 0; h < shape.num_kv_heads; ++h) {
        const size_t src = seqs[i].table[t / bs] * block_floats +
                           (static_cast<size_t>(h) * bs + t % bs) * shape.head_dim;
        ref_seq.k.insert(ref_seq.k.end(), &k_floats[src], &k_floats[src] + shape.head_dim);
        ref_seq.v.insert(ref_seq.v.end(), &v_floats[src], &v_floats[src] + shape.head_dim);
      }
    }
    std::vector<float> ref(n);
    ReferenceAttention(shape, ref_seq, &q[attention[i].first_row * q_stride], q_stride, ref.data());
    float max_err = 0;
    for (size_t j = 0; j < n; ++j) max_err = std::max(max_err, std::abs(ref[j] - together[at + j]));
    EXPECT_LT(max_err, Bf16Products(kernels, dtype, seqs[i].num_rows) ? 2e-2 : 1e-4)
        << "sequence " << i << " " << kernels.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, SharedPrefixTest,
                         ::testing::Combine(::testing::ValuesIn(SupportedKernels()),
                                            ::testing::Values(KvDtype::kF32, KvDtype::kBf16,
                                                              KvDtype::kF16, KvDtype::kInt8)));

}  // namespace
}  // namespace pagoda
