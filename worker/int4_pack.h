// Weight matrices into the int4 panels of the GEMM kernels (worker/kernels/kernels.h,
// PackedShape's int4 layout), from tensors as their files store them, panel by panel (so a
// caller packs panels in parallel, with no f32 copy of the matrix), and rows back out.
// A matrix is `parts` stacked by rows (q | k | v fused): output column c is row c of the
// concatenation. Q4_0 and Q4_K blocks are copied, not re-rounded; other types are rounded to
// Q4_0's blocks from their f32 values.
// Thread-safe: pure functions of their arguments.
#ifndef PAGODA_WORKER_INT4_PACK_H_
#define PAGODA_WORKER_INT4_PACK_H_

#include <cstdint>
#include <span>

#include "common/model/tensor_view.h"
#include "worker/kernels/kernels.h"

namespace pagoda {

// The scales that keep `parts` exactly: kQ4_K when every part is Q4_K, else kQ4_0 (Q4_0 parts
// copied; a Q4_K part among others is then rounded from its floats, like an f32 one).
PackedShape::Int4Scales ChooseInt4Scales(std::span<const TensorView> parts);

// The int4 shape of `parts` in panels of `panel_width` (Kernels::int8_panel_width) columns,
// scales as ChooseInt4Scales. REQUIRES: parts non-empty, all with the same cols.
PackedShape Int4Shape(std::span<const TensorView> parts, int panel_width);

// Writes every byte of panel `panel_index` (shape.panel_bytes() at `panel`).
// REQUIRES: shape is Int4Shape(parts, ...), or has kQ4_0 scales and parts' rows and cols.
void PackInt4Panel(std::span<const TensorView> parts, const PackedShape& shape, int panel_index,
                   uint8_t* panel);

// Row i of the packed matrix (shape.k floats): for a Q4_0 or Q4_K source row, bit for bit what
// DequantizeGgml gives. REQUIRES: 0 ≤ i < shape.n.
void Int4Row(const uint8_t* packed, const PackedShape& shape, int i, float* out);

// n ≤ 32 floats as one Q4_0 block: f16 d and q[0..31] ∈ [0, 15], w ≈ (q − 8)·d, q = 8 past n.
// The scale is the one of smallest squared error among llama.cpp's (d = −max/8, the value of
// largest magnitude at −8), others near it and their least-squares refits, among those with no
// value further than amax / 8 off: never worse than llama.cpp's rounding, in total or anywhere.
void QuantizeQ4_0Block(const float* w, int n, uint16_t* d, uint8_t* q);

}  // namespace pagoda

#endif  // PAGODA_WORKER_INT4_PACK_H_
