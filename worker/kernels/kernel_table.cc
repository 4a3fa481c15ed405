// The element-wise kernels of one ISA, and the table that names all of its kernels.
#include "worker/kernels/gemm_tile.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {

void PackRows(const float* x, int rows, int k, int tile_begin, int tile_end, float* packed);
void GemmF32(const float* packed_x, int rows, const float* packed, const PackedShape& shape,
             int panel_begin, int panel_end, const float* bias, bool accumulate, float* y, int ldy);
void GemmBf16(const float* packed_x, int rows, const uint16_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy);
void QuantizeRows(const float* x, int rows, int k, int k_padded, int tile_begin, int tile_end,
                  uint8_t* packed);
void GemmInt8(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy);
void GemmInt4(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
              int panel_begin, int panel_end, const float* bias, bool accumulate, float* y,
              int ldy);
void GemmQ6K(const uint8_t* packed_x, int rows, const uint8_t* packed, const PackedShape& shape,
             int panel_begin, int panel_end, const float* bias, bool accumulate, float* y, int ldy);
void Attention(const AttentionTile& tile);
void AttentionPrefill(const AttentionTile& tile);
void LoraShrink(const LoraMatrix& a, const float* x, int ldx, const int* rows, int n, int k_begin,
                int k_end, float* t);
void LoraExpand(const LoraMatrix& b, const float* t, const int* rows, int n, int j_begin, int j_end,
                float* y, int ldy);
#if !defined(__AVX512F__)
void AttentionDecodeInt8(const AttentionTile& tile);
#endif
#if defined(__AVX512F__)
void PackRowsBf16(const float* x, int rows, int k, int tile_begin, int tile_end, uint32_t* packed);
void AttentionPrefillBf16Dot(const AttentionTile& tile);
void AttentionDecodeBf16Dot(const AttentionTile& tile);
void GemmBf16Dot(const uint32_t* packed_x, int rows, const uint16_t* packed,
                 const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                 bool accumulate, float* y, int ldy);
#endif

namespace {

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
  V acc0 = Zero(), acc1 = Zero();
  int i = 0;
  for (; i + 2 * kWidth <= n; i += 2 * kWidth) {
    const V a = Load(x + i), b = Load(x + i + kWidth);
    acc0 = Fma(a, a, acc0);
    acc1 = Fma(b, b, acc1);
  }
  float ss = ReduceAdd(Add(acc0, acc1));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / __builtin_sqrtf(ss / n + eps);
  const V s = Set1(scale);
  i = 0;
  for (; i + kWidth <= n; i += kWidth) Store(out + i, Mul(Load(w + i), Mul(s, Load(x + i))));
  for (; i < n; ++i) out[i] = w[i] * (scale * x[i]);
}

void SwiGlu(const float* gate, const float* up, int n, float* h) {
  int i = 0;
  const V one = Set1(1.0f);
  for (; i + kWidth <= n; i += kWidth) {
    const V g = Load(gate + i);
    const V silu = Div(g, Add(one, Exp(Sub(Zero(), g))));
    Store(h + i, Mul(silu, Load(up + i)));
  }
  for (; i < n; ++i) h[i] = gate[i] / (1.0f + __builtin_expf(-gate[i])) * up[i];
}

constexpr Kernels kKernels = {
#if defined(__AVX512F__)
    .name = "avx512",
#else
    .name = "avx2",
#endif
    .panel_width = 2 * kWidth,
#if defined(__AVX512F__)
    .row_tile = 12,
#else
    .row_tile = 6,
#endif
    .pack_rows = &PackRows,
    .gemm_f32 = &GemmF32,
    .gemm_bf16 = &GemmBf16,
    .int8_panel_width = 2 * kWidth,
#if defined(__AVX512F__)
    .int8_row_tile = 6,
    .int8_weights_offset = true,
#else
    .int8_row_tile = 2,
    .int8_weights_offset = false,
#endif
    .quantize_rows = &QuantizeRows,
    .gemm_int8 = &GemmInt8,
    .gemm_int4 = &GemmInt4,
    .gemm_q6k = &GemmQ6K,
#if defined(__AVX512F__)
    .bf16_row_tile = kBf16RowTile,
    .pack_rows_bf16 = &PackRowsBf16,
    .gemm_bf16dot = &GemmBf16Dot,
#else
    .bf16_row_tile = 0,
    .pack_rows_bf16 = nullptr,
    .gemm_bf16dot = nullptr,
#endif
    .rms_norm = &RmsNorm,
    .swiglu = &SwiGlu,
    .attention = &Attention,
    .attention_prefill = &AttentionPrefill,
#if defined(__AVX512F__)
    .attention_prefill_bf16dot = &AttentionPrefillBf16Dot,
    .attention_decode_bf16dot = &AttentionDecodeBf16Dot,
#else
    .attention_prefill_bf16dot = nullptr,
    .attention_decode_bf16dot = nullptr,
#endif
#if defined(__AVX512F__)
    .attention_decode_int8 = nullptr,  // isa.cc lends AVX2's where the CPU lacks AVX512_BF16
#else
    .attention_decode_int8 = &AttentionDecodeInt8,
#endif
    .lora_shrink = &LoraShrink,
    .lora_expand = &LoraExpand,
};

}  // namespace

const Kernels& GetKernels() { return kKernels; }

}  // namespace PAGODA_ISA
}  // namespace pagoda
