// y (rows, n) = bf16(x) · Wᵀ [+ bias] [+ y] through oneDNN's matmul (brgemm), over bf16 weights
// in the panels of the shared bf16 layout (oneDNN's BA16a64b2a for Wᵀ, dims {k, n}):
//   panel p (64 output columns) holds k_padded · 64 bf16, element (kk, j) = W[64p + j][kk] at
//   p·k_padded·64 + (kk/2)·128 + 2j + kk%2, zero in the padding.
// oneDNN pads k to its block of 32, so it reads the caller's panels in place when k_padded is k
// rounded up to 32 (every k that is a multiple of 32, as in Llama models) and its implementation
// on this CPU picks that layout (AVX512_BF16's does). Otherwise (k_padded = k rounded up to 16
// alone, or a CPU whose brgemm picks another layout, as AMX may) it keeps its own reordered copy,
// and uses_caller_layout() tells the caller it may drop its panels.
//
// oneDNN 2.6's brgemm needs the row count when a primitive is made (a run-time row count, or a
// y with a row stride, gets ref:any, 200x slower or worse), so rows run in chunks of at most
// `chunk_rows`, each by a primitive of its exact count, made on first use (0.04-0.35 ms, ~60 KB)
// and shared by every matmul of the same shape in the process. tools/onednn_benchmark.cc chose
// 128: within 1-3% of one primitive per row count at 512 rows (which would hold 512 primitives
// per shape, ~150 MB over a 1B model's 5 shapes); chunks of 64 were 3-7% slower at 100-512 rows.
//
// Thread-compatible: Run() is const and must not run concurrently with itself, nor with a Run of
// another matmul of the same shape (they share oneDNN primitives). Call it outside any OpenMP
// region: oneDNN parallelises inside, on the OpenMP threads (Debian's oneDNN uses libgomp).
#ifndef PAGODA_WORKER_ONEDNN_MATMUL_H_
#define PAGODA_WORKER_ONEDNN_MATMUL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda {

// x (count) rounded to bf16 as FloatToBf16 does (nearest even; a NaN stays a NaN, quietened),
// on the OpenMP threads when count is large. Call outside any parallel region.
void RoundToBf16(const float* x, int64_t count, uint16_t* out);

class OneDnnBf16Matmul {
 public:
  // Rows per oneDNN call by default: more rows run in chunks of this many (see above).
  static constexpr int kChunkRows = 128;

  // `panels`: ceil(n/64) panels of k_padded · 64 bf16 as above; borrowed, must outlive this
  // object unless uses_caller_layout() is false. `bias`: n floats (copied) or null.
  // `accumulate`: add the product to what y holds. `chunk_rows`: rows per oneDNN call (the
  // benchmark tries others). Makes the primitives for 1 and chunk_rows rows (y dense).
  // Fails with UNIMPLEMENTED where oneDNN has only its reference implementation (an AVX2-only
  // CPU), rather than run it. (AVX-512 without BF16 gets gemm:jit on its own plain copy.)
  // REQUIRES: 0 < n, 0 < k <= k_padded, k_padded % 16 == 0, 0 < chunk_rows.
  static absl::StatusOr<std::unique_ptr<OneDnnBf16Matmul>> Create(const uint16_t* panels, int n,
                                                                  int k, int k_padded,
                                                                  const float* bias,
                                                                  bool accumulate,
                                                                  int chunk_rows = kChunkRows);
  ~OneDnnBf16Matmul();
  OneDnnBf16Matmul(const OneDnnBf16Matmul&) = delete;
  OneDnnBf16Matmul& operator=(const OneDnnBf16Matmul&) = delete;

  // REQUIRES: 0 < rows; x holds (rows, k), dense; row r of y is y + r·ldy, ldy >= n (0: n).
  // A y wider than n is written through a dense buffer (oneDNN 2.6's brgemm takes no stride).
  // x is rounded to bf16 (round to nearest even, as FloatToBf16). Fails only if oneDNN cannot
  // make a non-reference primitive for a new row count (then y is unchanged from that chunk on).
  absl::Status Run(const float* x, int rows, float* y, int ldy) const;

  // False when this object reads its own reordered copy of the weights (the caller's panels
  // are no longer needed).
  bool uses_caller_layout() const;
  // oneDNN's implementation for a chunk of chunk_rows rows ("brg:avx512_core_bf16").
  std::string impl_name() const;
  int n() const;
  int k() const;

 private:
  struct State;  // oneDNN objects (kept out of this header: only the worker links oneDNN)
  explicit OneDnnBf16Matmul(std::unique_ptr<State> state);

  // y (rows, n), dense, from x (rows, k) in bf16. Fails if oneDNN has no non-reference
  // implementation for `rows` rows.
  absl::Status RunChunk(const uint16_t* x, int rows, float* y) const;

  std::unique_ptr<State> state_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_ONEDNN_MATMUL_H_
