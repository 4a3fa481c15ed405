#include "worker/linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "common/numeric.h"
#include "glog/logging.h"
#include "worker/int4_pack.h"
#include "worker/kernels/isa.h"
#include "worker/q6k_pack.h"

namespace pagoda {
namespace {

// The f16 scale of one block of up to 32 weights, rounded as Q8_0 stores it, and the weights.
void QuantizeBlock(const float* w, int n, uint16_t* scale, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
  *scale = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
  const float d = _cvtsh_ss(*scale), inverse = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(w[i] * inverse), -127.0f, 127.0f));
  }
}

}  // namespace

Linear::Linear(const float* weight, int in, int out, const std::vector<float>& bias,
               bool accumulate, WeightDtype dtype)
    : kernels_(ActiveKernels()),
      shape_{.k = in,
             .n = out,
             .panel_width = dtype == WeightDtype::kInt8 || dtype == WeightDtype::kInt4
                                ? kernels_.int8_panel_width
                                : kernels_.panel_width,
             .k_padded = (in + 31) / 32 * 32,
             .dtype = dtype},
      accumulate_(accumulate),
      packed_((shape_.num_bytes() + 3) / 4),
      bias_(bias) {
  CHECK(bias.empty() || static_cast<int>(bias.size()) == out) << bias.size() << " vs " << out;
  CHECK(dtype != WeightDtype::kQ6K) << "q6_k packs from Q6_K views only";  // branch q6k-kernels
  const int pw = shape_.panel_width;
  uint8_t* const base = reinterpret_cast<uint8_t*>(packed_.data());
  // Element (kk, j) of panel p is W[p·pw + j][kk] (kernels.h); the buffer starts zeroed, so
  // padding stays zero.
#pragma omp parallel for schedule(static)
  for (int p = 0; p < shape_.num_panels(); ++p) {
    uint8_t* panel = base + p * shape_.panel_bytes();
    const int cols = std::min(pw, out - p * pw);
    const float* rows = weight + static_cast<size_t>(p) * pw * in;
    switch (dtype) {
      case WeightDtype::kF32: {
        float* f = reinterpret_cast<float*>(panel);
        for (int kk = 0; kk < in; ++kk) {
          for (int j = 0; j < cols; ++j) f[static_cast<size_t>(kk) * pw + j] = rows[j * in + kk];
        }
        break;
      }
      case WeightDtype::kBf16: {
        uint16_t* h = reinterpret_cast<uint16_t*>(panel);
        const int half = pw / 2;
        for (int kk = 0; kk < in; ++kk) {
          for (int j = 0; j < cols; ++j) {
            const int pos = j < half ? 2 * j : 2 * (j - half) + 1;
            h[static_cast<size_t>(kk) * pw + pos] = FloatToBf16(rows[j * in + kk]);
          }
        }
        break;
      }
      case WeightDtype::kInt8: {
        constexpr int kB = PackedShape::kInt8Block;
        const size_t block_bytes = static_cast<size_t>(kB) * pw + 2 * pw;
        for (int b = 0; b < shape_.num_int8_blocks(); ++b) {
          uint8_t* block = panel + b * block_bytes;
          uint16_t* scales = reinterpret_cast<uint16_t*>(block + kB * pw);
          const int k0 = b * kB, n = std::min(kB, in - k0);
          if (n <= 0) break;
          for (int j = 0; j < cols; ++j) {
            int8_t q[kB];
            QuantizeBlock(rows + static_cast<size_t>(j) * in + k0, n, &scales[j], q);
            for (int i = 0; i < n; ++i) {
              const int v = q[i] + (kernels_.int8_weights_offset ? 128 : 0);
              block[(i / 4) * 4 * pw + j * 4 + i % 4] = static_cast<uint8_t>(v);
            }
          }
        }
        break;
      }
      case WeightDtype::kQ6K:  // refused above
        break;
      case WeightDtype::kInt4: {  // rounded to Q4_0's blocks (worker/int4_pack.h)
        const TensorView view{.type = GgmlType::kF32,
                              .rows = out,
                              .cols = in,
                              .data = reinterpret_cast<const uint8_t*>(weight)};
        PackInt4Panel({&view, 1}, shape_, p, panel);
        break;
      }
    }
  }
}

// --- q6_k (branch q6k-kernels) ---
Linear::Linear(std::span<const TensorView> parts, const std::vector<float>& bias, bool accumulate,
               WeightDtype dtype)
    : kernels_(ActiveKernels()),
      shape_(Q6KShape(parts, kernels_.int8_panel_width)),
      accumulate_(accumulate),
      packed_((shape_.num_bytes() + 3) / 4),
      bias_(bias) {
  CHECK(dtype == WeightDtype::kQ6K) << "only q6_k packs from views on this branch";
  CHECK(bias.empty() || static_cast<int>(bias.size()) == shape_.n);
  uint8_t* const base = reinterpret_cast<uint8_t*>(packed_.data());
#pragma omp parallel for schedule(static)
  for (int p = 0; p < shape_.num_panels(); ++p) {
    PackQ6KPanel(parts, shape_, p, base + p * shape_.panel_bytes());
  }
}
// --- end q6_k ---

void Linear::Row(int i, float* out) const {
  const int pw = shape_.panel_width, j = i % pw;
  const uint8_t* panel = bytes() + (i / pw) * shape_.panel_bytes();
  switch (shape_.dtype) {
    case WeightDtype::kF32: {
      const float* f = reinterpret_cast<const float*>(panel);
      for (int kk = 0; kk < shape_.k; ++kk) out[kk] = f[static_cast<size_t>(kk) * pw + j];
      return;
    }
    case WeightDtype::kBf16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(panel);
      const int pos = j < pw / 2 ? 2 * j : 2 * (j - pw / 2) + 1;
      for (int kk = 0; kk < shape_.k; ++kk)
        out[kk] = Bf16ToFloat(h[static_cast<size_t>(kk) * pw + pos]);
      return;
    }
    case WeightDtype::kInt8: {
      constexpr int kB = PackedShape::kInt8Block;
      const size_t block_bytes = static_cast<size_t>(kB) * pw + 2 * pw;
      const int offset = kernels_.int8_weights_offset ? 128 : 0;
      for (int kk = 0; kk < shape_.k; ++kk) {
        const uint8_t* block = panel + (kk / kB) * block_bytes;
        const uint16_t* scales = reinterpret_cast<const uint16_t*>(block + kB * pw);
        const int i_in = kk % kB;
        const uint8_t byte = block[(i_in / 4) * 4 * pw + j * 4 + i_in % 4];
        const int q = offset ? byte - offset : static_cast<int8_t>(byte);
        out[kk] = static_cast<float>(q) * _cvtsh_ss(scales[j]);
      }
      return;
    }
    case WeightDtype::kInt4:
      Int4Row(bytes(), shape_, i, out);
      return;
    case WeightDtype::kQ6K:
      Q6KRow(bytes(), shape_, i, out);
      return;
  }
}

void Linear::Run(const float* x, int rows, float* y) const {
  const int num_panels = shape_.num_panels();
  const float* bias = bias_.empty() ? nullptr : bias_.data();
  if (shape_.dtype == WeightDtype::kInt8 || shape_.dtype == WeightDtype::kInt4 ||
      shape_.dtype == WeightDtype::kQ6K) {
    // x quantized by row tiles; grows to the largest step once, then never allocates.
    static thread_local std::vector<uint8_t> quantized;
    const int tile = kernels_.int8_row_tile, num_tiles = (rows + tile - 1) / tile;
    const size_t size = static_cast<size_t>(num_tiles) * Int8TileBytes(tile, shape_.k_padded);
    if (quantized.size() < size) quantized.resize(size);
    uint8_t* const qx = quantized.data();  // thread_local: the OpenMP threads must see this one
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      kernels_.quantize_rows(x, rows, shape_.k, shape_.k_padded, num_tiles * t / nt,
                             num_tiles * (t + 1) / nt, qx);
#pragma omp barrier
      const int begin = static_cast<int>(static_cast<int64_t>(num_panels) * t / nt);
      const int end = static_cast<int>(static_cast<int64_t>(num_panels) * (t + 1) / nt);
      if (shape_.dtype == WeightDtype::kInt4) {
        kernels_.gemm_int4(qx, rows, bytes(), shape_, begin, end, bias, accumulate_, y, shape_.n);
      } else if (shape_.dtype == WeightDtype::kQ6K) {
        kernels_.gemm_q6k(qx, rows, bytes(), shape_, begin, end, bias, accumulate_, y, shape_.n);
      } else {
        kernels_.gemm_int8(qx, rows, bytes(), shape_, begin, end, bias, accumulate_, y);
      }
    }
    return;
  }
  // x packed by row tiles; grows to the largest step once, then never allocates.
  static thread_local std::vector<float> packed_x;
  const int num_tiles = kernels_.row_tiles(rows);
  const size_t packed_floats = static_cast<size_t>(num_tiles) * kernels_.row_tile * shape_.k;
  if (packed_x.size() < packed_floats) packed_x.resize(packed_floats);
  float* const px = packed_x.data();  // thread_local: the OpenMP threads must see this one
  const bool bf16 = shape_.dtype == WeightDtype::kBf16;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    kernels_.pack_rows(x, rows, shape_.k, num_tiles * t / nt, num_tiles * (t + 1) / nt, px);
#pragma omp barrier
    // Contiguous runs of panels: each thread streams its own part of the weights.
    const int begin = static_cast<int>(static_cast<int64_t>(num_panels) * t / nt);
    const int end = static_cast<int>(static_cast<int64_t>(num_panels) * (t + 1) / nt);
    if (bf16) {
      kernels_.gemm_bf16(px, rows, reinterpret_cast<const uint16_t*>(packed_.data()), shape_, begin,
                         end, bias, accumulate_, y);
    } else {
      kernels_.gemm_f32(px, rows, packed_.data(), shape_, begin, end, bias, accumulate_, y);
    }
  }
}

}  // namespace pagoda
