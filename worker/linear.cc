#include "worker/linear.h"

#include <omp.h>

#include <algorithm>

#include "glog/logging.h"
#include "worker/kernels/isa.h"

namespace pagoda {

Linear::Linear(const float* weight, int in, int out, const std::vector<float>& bias,
               bool accumulate)
    : kernels_(ActiveKernels()),
      shape_{
          .k = in, .n = out, .panel_width = kernels_.panel_width, .k_padded = (in + 15) / 16 * 16},
      accumulate_(accumulate),
      packed_(shape_.num_floats()),
      bias_(bias) {
  CHECK(bias.empty() || static_cast<int>(bias.size()) == out) << bias.size() << " vs " << out;
  const int pw = shape_.panel_width;
  // packed[p][kk][j] = W[p·pw + j][kk]; the buffer starts zeroed, so padding stays zero.
#pragma omp parallel for schedule(static)
  for (int p = 0; p < shape_.num_panels(); ++p) {
    float* panel = packed_.data() + p * shape_.panel_floats();
    const int cols = std::min(pw, out - p * pw);
    const float* rows = weight + static_cast<size_t>(p) * pw * in;
    for (int kk = 0; kk < in; ++kk) {
      for (int j = 0; j < cols; ++j) panel[static_cast<size_t>(kk) * pw + j] = rows[j * in + kk];
    }
  }
}

void Linear::Run(const float* x, int rows, float* y) const {
  // x packed by row tiles; grows to the largest step once, then never allocates.
  static thread_local std::vector<float> packed_x;
  const int num_tiles = kernels_.row_tiles(rows);
  const size_t packed_floats = static_cast<size_t>(num_tiles) * kernels_.row_tile * shape_.k;
  if (packed_x.size() < packed_floats) packed_x.resize(packed_floats);
  float* const px = packed_x.data();  // thread_local: the OpenMP threads must see this one
  const int num_panels = shape_.num_panels();
  const float* bias = bias_.empty() ? nullptr : bias_.data();
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    kernels_.pack_rows(x, rows, shape_.k, num_tiles * t / nt, num_tiles * (t + 1) / nt, px);
#pragma omp barrier
    // Contiguous runs of panels: each thread streams its own part of the weights.
    const int begin = static_cast<int>(static_cast<int64_t>(num_panels) * t / nt);
    const int end = static_cast<int>(static_cast<int64_t>(num_panels) * (t + 1) / nt);
    kernels_.gemm(px, rows, packed_.data(), shape_, begin, end, bias, accumulate_, y);
  }
}

}  // namespace pagoda
