// Q6_K weight matrices (GGUF's Q6_K tensors: output.weight, attn_v and ffn_down of a Q4_K_M
// file) into the q6_k panels of the GEMM kernels (worker/kernels/kernels.h, PackedShape), their
// blocks copied, not re-rounded, panel by panel (so a caller packs panels in parallel, with no
// f32 copy of the matrix), and rows back out. A matrix is `parts` stacked by rows: output
// column c is row c of the concatenation. The panels take the file's bytes exactly (210 per 256
// weights), plus the zeros of the last panel's missing columns.
// Thread-safe: pure functions of their arguments.
#ifndef PAGODA_WORKER_Q6K_PACK_H_
#define PAGODA_WORKER_Q6K_PACK_H_

#include <cstdint>
#include <span>

#include "common/model/tensor_view.h"
#include "worker/kernels/kernels.h"

namespace pagoda {

// Whether `parts` can be packed as q6_k: not empty, all Q6_K, all with the same cols.
bool CanPackQ6K(std::span<const TensorView> parts);

// The q6_k shape of `parts` in panels of `panel_width` (Kernels::int8_panel_width) columns.
// REQUIRES: CanPackQ6K(parts).
PackedShape Q6KShape(std::span<const TensorView> parts, int panel_width);

// Writes every byte of panel `panel_index` (shape.panel_bytes() at `panel`).
// REQUIRES: shape is Q6KShape(parts, ...).
void PackQ6KPanel(std::span<const TensorView> parts, const PackedShape& shape, int panel_index,
                  uint8_t* panel);

// Row i of the packed matrix (shape.k floats): bit for bit what DequantizeGgml gives for the
// source row. REQUIRES: 0 ≤ i < shape.n.
void Q6KRow(const uint8_t* packed, const PackedShape& shape, int i, float* out);

}  // namespace pagoda

#endif  // PAGODA_WORKER_Q6K_PACK_H_
