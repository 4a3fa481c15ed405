// How the attention kernels read a (block, KV head) run of the KV pool as f32 rows, for kernel
// sources compiled once per ISA (the rules of vec.h). 16-bit rows widen through elements.h's
// types; int8 rows (worker/kv_dtype.h) are block_size rows of head_dim bytes followed by their
// block_size f16 scales, and widen to each byte times its row's scale.
#ifndef PAGODA_WORKER_KERNELS_KV_ROWS_H_
#define PAGODA_WORKER_KERNELS_KV_ROWS_H_

#include <cstdint>
#include <type_traits>

#include "worker/kernels/elements.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {

// The int8 element type: WidenInt8 reads its runs.
struct Int8 {
  using Elem = int8_t;
};

// Elements of Elem between two (block, KV head) runs, block_size rows each.
template <typename T>
long RunElems(int bs, int hd) {
  if constexpr (std::is_same_v<T, Int8>) return static_cast<long>(bs) * (hd + 2);
  return static_cast<long>(bs) * hd;
}

// dst = the first `count` elements of src as f32.
template <typename T>
void Widen(const typename T::Elem* src, long count, float* dst) {
  long i = 0;
  for (; i + kWidth <= count; i += kWidth) Store(dst + i, T::LoadRow(src + i));
  for (; i < count; ++i) dst[i] = T::LoadOne(src + i);
}

// kWidth int8 values as f32.
[[gnu::always_inline]] inline V LoadInt8(const int8_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#endif
}

// dst (keys, hd) = the first `keys` rows of an int8 run (bs rows, then bs f16 scales) as f32,
// each row times its scale: the scale is applied once here, for every query head that reads it.
inline void WidenInt8(const int8_t* run, int keys, int hd, int bs, float* dst) {
  const int8_t* scales = run + static_cast<long>(bs) * hd;
  for (int j = 0; j < keys; ++j) {
    uint16_t half;
    __builtin_memcpy(&half, scales + 2 * j, sizeof(half));
    const float s = _cvtsh_ss(half);
    const V sv = Set1(s);
    const int8_t* q = run + static_cast<long>(j) * hd;
    float* out = dst + static_cast<long>(j) * hd;
    int d = 0;
    for (; d + kWidth <= hd; d += kWidth) Store(out + d, Mul(LoadInt8(q + d), sv));
    for (; d < hd; ++d) out[d] = static_cast<float>(q[d]) * s;
  }
}

// The first `keys` K and V rows of run `at` (in elements of T) as f32: the pool's own rows for
// f32, else widened into k_wide and v_wide (bs × hd floats each).
template <typename T>
[[gnu::always_inline]] inline void RowsOf(const typename T::Elem* k_pool,
                                          const typename T::Elem* v_pool, long at, int keys, int hd,
                                          int bs, float* k_wide, float* v_wide, const float** kb,
                                          const float** vb) {
  if constexpr (std::is_same_v<T, F32>) {
    *kb = k_pool + at;
    *vb = v_pool + at;
  } else if constexpr (std::is_same_v<T, Int8>) {
    WidenInt8(k_pool + at, keys, hd, bs, k_wide);
    WidenInt8(v_pool + at, keys, hd, bs, v_wide);
    *kb = k_wide;
    *vb = v_wide;
  } else {
    Widen<T>(k_pool + at, static_cast<long>(keys) * hd, k_wide);
    Widen<T>(v_pool + at, static_cast<long>(keys) * hd, v_wide);
    *kb = k_wide;
    *vb = v_wide;
  }
}

// Fetches the (block, KV heads) run of `bytes` at k and v towards L1 while another is computed.
[[gnu::always_inline]] inline void PrefetchRun(const void* k, const void* v, long bytes) {
  const char* nk = static_cast<const char*>(k);
  const char* nv = static_cast<const char*>(v);
  for (long off = 0; off < bytes; off += 64) {
    _mm_prefetch(nk + off, _MM_HINT_T0);
    _mm_prefetch(nv + off, _MM_HINT_T0);
  }
}

// Walks a tile's blocks (AttentionTile's range) and KV heads: f(base, keys, h, at) for each,
// with `base` the block's first position, `keys` the most any row of the tile sees in it and
// `at` the (block, head h) run's first element of T; the next block's runs are fetched
// meanwhile (blocks are scattered): all of the tile's heads at the block's start, or with
// kPerHead each head's run just before this block's run of that head. The bf16 decode kernel
// takes kPerHead (8 sequences at 8k: 1.1–1.4× faster); the f32 kernel ran 5–10% slower that
// way and keeps the whole block's fetch (docs/BENCHMARKS.md §41).
template <typename T, bool kPerHead = false, typename F>
[[gnu::always_inline]] inline void ForEachRun(const AttentionTile& t, F&& f) {
  using Elem = typename T::Elem;
  const Elem* k_pool = static_cast<const Elem*>(t.k_pool);
  const Elem* v_pool = static_cast<const Elem*>(t.v_pool);
  const int bs = t.block_size;
  const int last_pos = t.start_pos + t.row_end - 1;
  const int num_blocks = t.block_end >= 0 ? t.block_end : last_pos / bs + 1;
  const long head_stride = RunElems<T>(bs, t.head_dim);
  const long block_stride = t.num_kv_heads * head_stride;
  const long head_bytes = head_stride * sizeof(Elem);
  for (int b = t.block_begin; b < num_blocks; ++b) {
    const bool last = b + 1 == num_blocks;
    if (!kPerHead && !last) {
      const long next = t.block_table[b + 1] * block_stride + t.head_begin * head_stride;
      PrefetchRun(k_pool + next, v_pool + next, (t.head_end - t.head_begin) * head_bytes);
    }
    const int base = b * bs;
    const int keys = MinInt(bs, last_pos - base + 1);
    for (int h = t.head_begin; h < t.head_end; ++h) {
      if (kPerHead && !last) {
        const long next = t.block_table[b + 1] * block_stride + h * head_stride;
        PrefetchRun(k_pool + next, v_pool + next, head_bytes);
      }
      f(base, keys, h, t.block_table[b] * block_stride + h * head_stride);
    }
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_KV_ROWS_H_
