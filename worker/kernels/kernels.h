// The hand-written kernels, one table per ISA. Each table is built from the same sources
// compiled for that ISA (worker/CMakeLists.txt); worker/kernels/isa.h picks one at start.
// Kernels are single-threaded: callers split the work between OpenMP threads.
#ifndef PAGODA_WORKER_KERNELS_KERNELS_H_
#define PAGODA_WORKER_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "common/dtype_names.h"
#include "worker/kv_dtype.h"

namespace pagoda {

// A weight matrix W (n, k) packed for the GEMM kernels: panels of `panel_width` output columns,
// zero beyond k and n. Element (kk, j) of panel p is W[p·panel_width + j][kk], stored as
//   f32:  packed[p][kk][j]                          (oneDNN's BA16a{panel_width}b layout of Wᵀ)
//   bf16: packed[p][kk][pos(j)], pos(j) = 2j for j < w, 2(j − w) + 1 otherwise (w = width/2):
//         one vector load holds both halves of the row, split by a shift and a mask
//   bf16 with compute_bf16 (multiplied in bf16 by gemm_bf16dot, activations rounded to bf16):
//         panel_width 64, k_padded = k rounded up to 32, packed[p][kk/2][j][kk%2], that is
//         uint16 p·k_padded·64 + (kk/2)·128 + 2j + kk%2: a 32-bit lane holds 2 k of one column,
//         as vdpbf16ps takes them. This is oneDNN's BA16a64b2a layout of Wᵀ (dims {k, n} padded
//         to {k_padded, 64·panels}; oneDNN pads k to 32), so its matmul reads the same buffer.
//   int8: blocks of 32 along k, each [kk/4][j][kk%4] bytes (an int32 lane holds 4 k of one
//         column, as VNNI's dot product takes them) and then f16 scales [j], one per column and
//         block (Q8_0's precision: w ≈ q · scale). q is stored + 128 as unsigned bytes when the
//         kernel multiplies unsigned weights by signed activations (Kernels::int8_weights_offset).
//   int4: blocks of 32 along k of 18·panel_width bytes: the nibbles, 16·panel_width bytes as
//         8 groups of 4 k, group g at 2·panel_width·g holding [j][kk%4] for j < h = width/2,
//         column j in the low nibble and column j + h in the high one (one vector load and an
//         and/shift give the two halves of the panel, each lane 4 k of one column as VNNI takes
//         them), q ∈ [0, 15] unsigned; then 2·panel_width bytes of scales, per int4_scales:
//           kQ4_0: f16 d [j]; w = (q − 8)·d (Q4_0's blocks, copied or rounded from floats);
//           kQ4_K: u8 sc [j], then u8 m [j]; and before every 8 blocks (256 k, k_padded is a
//                  multiple of 256) a header of f16 d [j] then f16 dmin [j];
//                  w = (d·sc)·q − dmin·m, each product exact in f32 (Q4_K's blocks, copied).
//         4.5 bits a weight (Q4_0) and 4.625 (Q4_K, 1.028× the file's 4.5).
//   q6_k: Q6_K's blocks (q ∈ [0, 63], w = (d·sc)·(q − 32)) in superblocks of 256 k (k_padded = k,
//         a multiple of 256): a header of f16 d [j], then 8 blocks of 32 k of 26·panel_width
//         bytes each: the low 4 bits of q as int4's nibbles (16·panel_width bytes), the high 2
//         bits (8·panel_width bytes: 4 vectors, one per groups 2t and 2t + 1, byte i beside the
//         nibble byte i, holding for group 2t bits 4-5 of the low-nibble column and 6-7 of the
//         high-nibble one, for group 2t + 1 bits 0-1 and 2-3), then int8 sc [2][j], one per 16 k.
//         210 bytes per 256 weights of a column: the file's size exactly.
struct PackedShape {
  enum class Int4Scales : uint8_t { kQ4_0, kQ4_K };
  int k = 0, n = 0;
  int panel_width = 0;  // output columns per panel
  int k_padded = 0;     // k rounded up to 32 (int4 kQ4_K: k, a multiple of 256; bf16
                        // with compute_bf16: to 16)
  WeightDtype dtype = WeightDtype::kF32;
  Int4Scales int4_scales = Int4Scales::kQ4_0;  // int4 only
  bool compute_bf16 = false;                   // bf16 only: the pairs layout of gemm_bf16dot
  static constexpr int kBf16Panel = 64;        // panel_width with compute_bf16
  static constexpr int kInt8Block = 32;
  static constexpr int kQ4KBlocks = 8;  // int4 kQ4_K and q6_k: blocks of 32 under one header
  int num_panels() const { return (n + panel_width - 1) / panel_width; }
  int num_int8_blocks() const { return k_padded / kInt8Block; }
  // int4: bytes of one block of 32 k, and of one kQ4_K header.
  size_t int4_block_bytes() const { return static_cast<size_t>(18) * panel_width; }
  size_t int4_header_bytes() const { return static_cast<size_t>(4) * panel_width; }
  // int4: offset of block b in a panel.
  size_t int4_block_offset(int b) const {
    if (int4_scales == Int4Scales::kQ4_0) return b * int4_block_bytes();
    return (b / kQ4KBlocks + 1) * int4_header_bytes() + b * int4_block_bytes();
  }
  // q6_k: bytes of one block of 32 k and of one header; offset of block b in a panel.
  size_t q6k_block_bytes() const { return static_cast<size_t>(26) * panel_width; }
  size_t q6k_header_bytes() const { return static_cast<size_t>(2) * panel_width; }
  size_t q6k_block_offset(int b) const {
    return (b / kQ4KBlocks + 1) * q6k_header_bytes() + b * q6k_block_bytes();
  }
  size_t panel_bytes() const {
    const size_t elements = static_cast<size_t>(k_padded) * panel_width;
    switch (dtype) {
      case WeightDtype::kF32:
        return elements * 4;
      case WeightDtype::kBf16:
        return elements * 2;
      case WeightDtype::kInt8:
        return elements + static_cast<size_t>(num_int8_blocks()) * panel_width * 2;
      case WeightDtype::kInt4:
        return num_int8_blocks() * int4_block_bytes() +
               (int4_scales == Int4Scales::kQ4_K ? num_int8_blocks() / kQ4KBlocks : 0) *
                   int4_header_bytes();
      case WeightDtype::kQ6K:
        return num_int8_blocks() / kQ4KBlocks * q6k_header_bytes() +
               num_int8_blocks() * q6k_block_bytes();
    }
    return 0;
  }
  size_t num_bytes() const { return panel_bytes() * num_panels(); }
};

// Bytes of one row tile of activations quantized for the int8 GEMM, per block of 32 along k:
// int32 words [kk/4][r] (4 signed bytes of row r), then float scales [r], then int32 [r] of
// −128 · Σ q (what unsigned weights stored + 128 add).
inline size_t Int8TileBytes(int row_tile, int k_padded) {
  return static_cast<size_t>(k_padded / PackedShape::kInt8Block) * 40 * row_tile;
}

// k_padded of a bf16 matrix with compute_bf16.
inline int Bf16KPadded(int k) { return (k + 31) / 32 * 32; }

// 32-bit words of one row tile of activations packed by pack_rows_bf16: [kk/2][r], each word
// x[r][kk] | x[r][kk + 1] << 16 as bf16, zero past k and past the rows.
inline size_t Bf16TileWords(int row_tile, int k) {
  return static_cast<size_t>(Bf16KPadded(k) / 2) * row_tile;
}

// One step of paged attention for a tile (paged_attention.cc describes the work split).
//
// The tile's running softmax lives in `scratch`: m (states floats), l (states), then the
// unnormalised outputs (states × head_dim), where states = rows × query heads of the tile and
// state s = (row − row_begin) · query heads + (query head − head_begin · group). A tile can stop
// before normalising (`finish` false), leaving them there, and a later tile can go on from them
// (`resume`): this is how blocks shared by several sequences are read once for all of them.
struct AttentionTile {
  int num_heads, num_kv_heads, head_dim, block_size;
  int start_pos;             // the sequence's tokens already cached
  int row_begin, row_end;    // query rows of the sequence, [begin, end)
  int head_begin, head_end;  // KV heads, [begin, end)
  const int* block_table;
  const float* q;  // row r of the sequence at q + r·q_stride
  int q_stride;
  const void* k_pool;  // [num_blocks, num_kv_heads, block_size, head_dim] of kv_dtype
  const void* v_pool;
  float* out;      // row r at out + r·num_heads·head_dim
  float* scratch;  // AttentionScratchFloats(...) floats
  KvDtype kv_dtype = KvDtype::kF32;
  // Blocks [block_begin, block_end) of the table; block_end −1: through the last row's.
  int block_begin = 0, block_end = -1;
  bool resume = false;  // scratch holds the states of blocks before block_begin
  bool finish = true;   // normalise into out (else leave the states in scratch)
};

// A LoRA matrix (worker/packed_lora.h): (rows, cols) row-major and unpadded, f32 or bf16 (the
// top halves of f32s).
struct LoraMatrix {
  const void* data = nullptr;
  int rows = 0, cols = 0;
  bool bf16 = false;
};

struct Kernels {
  const char* name;  // "avx2", "avx512"
  int panel_width;   // of PackedShape, for this ISA's GEMM tile
  int row_tile;      // rows of x per GEMM register tile
  // Packs row tiles [tile_begin, tile_end) of x (rows, k) for the f32 and bf16 GEMMs: tile t
  // at packed + t·row_tile·k, as packed[kk][r] = x[t·row_tile + r][kk].
  // `packed` holds row_tiles(rows)·row_tile·k floats.
  void (*pack_rows)(const float* x, int rows, int k, int tile_begin, int tile_end, float* packed);
  // y (rows, n) = x (rows, k) · Wᵀ [+ bias] [+ y] for output panels [panel_begin, panel_end),
  // x packed by pack_rows, W packed as f32 or bf16. Row r of y starts at y + r·ldy (ldy >= n:
  // a Linear may write a column range of a wider buffer).
  void (*gemm_f32)(const float* packed_x, int rows, const float* packed, const PackedShape& shape,
                   int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
                   int ldy);
  void (*gemm_bf16)(const float* packed_x, int rows, const uint16_t* packed,
                    const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                    bool accumulate, float* y, int ldy);
  // The int8 GEMM: x quantized per row and block of 32 (Int8TileBytes) by quantize_rows, in
  // tiles of int8_row_tile rows; W packed as int8 in panels of int8_panel_width, + 128 when
  // int8_weights_offset.
  int int8_panel_width;
  int int8_row_tile;
  bool int8_weights_offset;
  void (*quantize_rows)(const float* x, int rows, int k, int k_padded, int tile_begin, int tile_end,
                        uint8_t* packed);
  void (*gemm_int8)(const uint8_t* packed_x, int rows, const uint8_t* packed,
                    const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                    bool accumulate, float* y, int ldy);
  // The int4 GEMM: x as for gemm_int8 (quantize_rows, int8_row_tile), W packed as int4 in panels
  // of int8_panel_width; row r of y at y + r·ldy.
  void (*gemm_int4)(const uint8_t* packed_x, int rows, const uint8_t* packed,
                    const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                    bool accumulate, float* y, int ldy);
  // The Q6_K GEMM: x as for gemm_int8, W packed as q6_k in panels of int8_panel_width.
  void (*gemm_q6k)(const uint8_t* packed_x, int rows, const uint8_t* packed,
                   const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                   bool accumulate, float* y, int ldy);
  // The bf16-compute GEMM (PackedShape::compute_bf16), null where the CPU lacks AVX512_BF16
  // (and in the AVX2 table): pack_rows_bf16 rounds row tiles [tile_begin, tile_end) of x
  // (rows, k) to bf16, tile t at packed + t·Bf16TileWords(bf16_row_tile, k); gemm_bf16dot
  // multiplies them by W as gemm_bf16 does.
  int bf16_row_tile;
  void (*pack_rows_bf16)(const float* x, int rows, int k, int tile_begin, int tile_end,
                         uint32_t* packed);
  void (*gemm_bf16dot)(const uint32_t* packed_x, int rows, const uint16_t* packed,
                       const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                       bool accumulate, float* y, int ldy);
  int row_tiles(int rows) const { return (rows + row_tile - 1) / row_tile; }
  // out = w ⊙ x / sqrt(mean(x²) + eps); out may be x.
  void (*rms_norm)(const float* x, const float* w, int n, float eps, float* out);
  // h = SiLU(gate) · up.
  void (*swiglu)(const float* gate, const float* up, int n, float* h);
  void (*attention)(const AttentionTile& tile);
  // The same for a tile of a long prefill chunk: rows in vector lanes, several times faster on
  // many rows (attention_prefill_kernel.cc). Its sums round otherwise than `attention`'s, so a
  // sequence's step uses one or the other for all of its rows.
  void (*attention_prefill)(const AttentionTile& tile);
  // The same multiplying bf16 pairs (AVX512_BF16; nullptr without it), for a K/V cache stored
  // in fewer than 32 bits: q and p rounded to bf16, f32 sums. REQUIRES: head_dim even.
  void (*attention_prefill_bf16dot)(const AttentionTile& tile);
  // `attention` multiplying bf16 pairs (AVX512_BF16; nullptr without it), for a bf16 or int8
  // K/V cache (an f32 or f16 tile goes to `attention`): keys in the lanes for the scores,
  // head_dim for P·V; q and p rounded to bf16, f32 sums (attention_decode_bf16dot_kernel.cc).
  // REQUIRES: head_dim even.
  void (*attention_decode_bf16dot)(const AttentionTile& tile);
  // `attention` for an int8 K/V cache multiplying int16 pairs (AVX2's vpmaddwd; the AVX2 table,
  // and the AVX-512 table without AVX512_BF16, else nullptr): keys in the lanes for the scores,
  // head_dim for P·V, as attention_decode_bf16dot; q, and p times V's scales, rounded to int16,
  // int32 sums (attention_decode_int8_kernel.cc). Other tiles go to `attention`.
  void (*attention_decode_int8)(const AttentionTile& tile);
  // LoRA's low-rank products over the rows rows[0..n) of x and y (row i of x at
  // x + rows[i]·ldx). lora_shrink: t[i][k] = x[rows[i]] · a[k] for ranks [k_begin, k_end), with
  // t (n, a.rows) dense. lora_expand: y[rows[i]][j] += Σ_k t[i][k] · b[k][j] for columns
  // [j_begin, j_end) (b: rank × out). A row's sums are the same whatever rows share the call.
  void (*lora_shrink)(const LoraMatrix& a, const float* x, int ldx, const int* rows, int n,
                      int k_begin, int k_end, float* t);
  void (*lora_expand)(const LoraMatrix& b, const float* t, const int* rows, int n, int j_begin,
                      int j_end, float* y, int ldy);
};

// Whether `kernels` can multiply bf16 weights in bf16 (gemm_bf16dot).
inline bool HasBf16Compute(const Kernels& kernels) { return kernels.gemm_bf16dot != nullptr; }

// Floats of scratch an AttentionTile needs, for any attention kernel: its states, then the
// prefill kernels' rows in lanes (q and the states, rows rounded up to 16 lanes), one block's
// scores (two for attention's), one block of K and of V widened to f32, the bf16 prefill
// kernel's K rows and V pairs, and the bf16 decode kernel's q pairs, K transposed in passes of
// 16 keys, V pairs and row scales (which also hold the int8 decode kernel's, q's scales among
// them).
inline size_t AttentionScratchFloats(int rows, int query_heads, int head_dim, int block_size) {
  const size_t lanes = static_cast<size_t>(rows + 15) / 16 * 16;
  return static_cast<size_t>(rows) * query_heads * (head_dim + 2) +
         lanes * query_heads * (2 * head_dim + 2) +
         static_cast<size_t>(block_size) * (48 + 3 * head_dim) + 2 * head_dim +
         static_cast<size_t>(rows) * query_heads * head_dim / 2 +
         static_cast<size_t>(block_size + 15) / 16 * 16 * ((head_dim / 2 + 15) / 16 * 16) +
         static_cast<size_t>(block_size / 2 + 1) * head_dim + 2 * block_size + 32;
}

namespace avx2 {
const Kernels& GetKernels();
}
namespace avx512 {
const Kernels& GetKernels();
}

}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_KERNELS_H_
