// The check both 4- and 6-bit weight GEMMs pass (tests/worker/int4_test.cc, q6k_test.cc): the
// kernel's y against a float64 product of the packed weights as their Row function reads them
// and of the activations as QuantizeRows rounds them (read back from its own buffer), and
// against the unquantized activations within the bound of that rounding.
#ifndef PAGODA_TESTS_WORKER_QUANTIZED_GEMM_CHECK_H_
#define PAGODA_TESTS_WORKER_QUANTIZED_GEMM_CHECK_H_

#include <cstdint>
#include <random>
#include <vector>

#include "worker/kernels/kernels.h"

namespace pagoda::testing {

// Row i of a packed matrix (shape.k floats): Int4Row, Q6KRow.
using RowFn = void (*)(const uint8_t* packed, const PackedShape& shape, int i, float* out);
// Kernels::gemm_int4 and gemm_q6k.
using GemmFn = void (*)(const uint8_t* packed_x, int rows, const uint8_t* packed,
                        const PackedShape& shape, int panel_begin, int panel_end, const float* bias,
                        bool accumulate, float* y, int ldy);

// Runs `gemm` for rows 1..13 and 64, with and without bias and accumulation, row stride
// n + 5 (the columns past n must stay as they were), the panels in two calls over halves,
// and fails the current test on the first wrong value. x is normal, or every value 1 when
// `ones_x` (each quantized to 127: the integer sums at their largest for extreme weights).
void CheckQuantizedGemm(const Kernels& kernels, GemmFn gemm, RowFn row, const PackedShape& shape,
                        const std::vector<uint8_t>& packed, std::mt19937& rng, bool ones_x = false);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_WORKER_QUANTIZED_GEMM_CHECK_H_
