#include "worker/linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/numeric.h"
#include "glog/logging.h"
#include "worker/int4_pack.h"
#include "worker/kernels/isa.h"
#include "worker/q6k_pack.h"

namespace pagoda {
namespace {

// bf16 compute: our kernel up to this many rows, oneDNN's brgemm above (docs/BENCHMARKS.md §17).
constexpr int kOursUpToRows = 64;

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

int TotalRows(std::span<const TensorView> parts) {
  int64_t rows = 0;
  for (const TensorView& part : parts) rows += part.rows;
  return static_cast<int>(rows);
}

// Whether bf16 weights are multiplied in bf16 with `kernels`.
bool ComputesInBf16(WeightDtype dtype, ComputeDtype compute, const Kernels& kernels) {
  if (dtype != WeightDtype::kBf16 || compute == ComputeDtype::kF32) return false;
  if (HasBf16Compute(kernels)) return true;
  if (compute == ComputeDtype::kBf16) {
    LOG_FIRST_N(WARNING, 1) << "bf16 compute asked for, but the " << kernels.name
                            << " kernels lack AVX512_BF16: bf16 weights are widened to f32";
  }
  return false;
}

PackedShape PackedShapeOf(std::span<const TensorView> parts, WeightDtype dtype,
                          ComputeDtype compute, const Kernels& kernels) {
  if (ComputesInBf16(dtype, compute, kernels)) {
    const int k = static_cast<int>(parts[0].cols);
    return {.k = k,
            .n = TotalRows(parts),
            .panel_width = PackedShape::kBf16Panel,
            .k_padded = Bf16KPadded(k),
            .dtype = dtype,
            .compute_bf16 = true};
  }
  if (dtype == WeightDtype::kInt4) return Int4Shape(parts, kernels.int8_panel_width);
  if (dtype == WeightDtype::kQ6K) {
    CHECK(CanPackQ6K(parts)) << "q6_k packs Q6_K tensors only";  // auto picks it for no other
    return Q6KShape(parts, kernels.int8_panel_width);
  }
  return {
      .k = static_cast<int>(parts[0].cols),
      .n = TotalRows(parts),
      .panel_width = dtype == WeightDtype::kInt8 ? kernels.int8_panel_width : kernels.panel_width,
      .k_padded = static_cast<int>(parts[0].cols + 31) / 32 * 32,
      .dtype = dtype};
}

// PAGODA_MATMUL, read once: "ours", "onednn", or empty (each row class's winner).
MatmulEngine* ForcedEngine() {
  static MatmulEngine* forced = []() -> MatmulEngine* {
    static MatmulEngine engine;
    const char* env = std::getenv("PAGODA_MATMUL");
    const std::string_view wanted = env ? env : "";
    if (wanted == "ours") {
      engine = MatmulEngine::kOurs;
    } else if (wanted == "onednn") {
      engine = MatmulEngine::kOneDnn;
    } else {
      if (!wanted.empty()) LOG(WARNING) << "PAGODA_MATMUL=" << wanted << " is not ours or onednn";
      LOG(INFO) << "bf16 matmuls: ours up to " << kOursUpToRows << " rows, oneDNN above";
      return nullptr;
    }
    LOG(INFO) << "bf16 matmuls: " << wanted << " at every row count (PAGODA_MATMUL)";
    return &engine;
  }();
  return forced;
}

// A decode's panels are taken in about this many runs per thread.
constexpr int kRunsPerThread = 8;

// Inside a parallel region: gemm(begin, end) over this thread's panels. A decode's (one row)
// are runs taken in turn, so that a thread the host slows (the other vCPU's neighbour, its
// memory) takes fewer instead of the other waiting for it at the end; more rows take a
// contiguous share each (their panels stay in L2 across the row tiles).
template <typename Gemm>
void ForThisThreadsPanels(int rows, int num_panels, Gemm gemm) {
  const int nt = omp_get_num_threads();
  if (rows == 1) {
    const int run = std::max(1, num_panels / (kRunsPerThread * nt));
#pragma omp for schedule(dynamic) nowait
    for (int p = 0; p < num_panels; p += run) gemm(p, std::min(num_panels, p + run));
    return;
  }
  const int t = omp_get_thread_num();
  gemm(static_cast<int>(static_cast<int64_t>(num_panels) * t / nt),
       static_cast<int>(static_cast<int64_t>(num_panels) * (t + 1) / nt));
}

}  // namespace

MatmulEngine Bf16MatmulEngine(int rows) {
  if (const MatmulEngine* forced = ForcedEngine()) return *forced;
  return rows <= kOursUpToRows ? MatmulEngine::kOurs : MatmulEngine::kOneDnn;
}

Linear::Linear(const float* weight, int in, int out, const std::vector<float>& bias,
               bool accumulate, WeightDtype dtype, ComputeDtype compute)
    : Linear(
          std::array<TensorView, 1>{TensorView{.type = GgmlType::kF32,
                                               .rows = out,
                                               .cols = in,
                                               .data = reinterpret_cast<const uint8_t*>(weight)}},
          bias, accumulate, dtype, compute) {}

Linear::Linear(std::span<const TensorView> parts, const std::vector<float>& bias, bool accumulate,
               WeightDtype dtype, ComputeDtype compute)
    : kernels_(ActiveKernels()),
      shape_(PackedShapeOf(parts, dtype, compute, kernels_)),
      accumulate_(accumulate),
      packed_((shape_.num_bytes() + 3) / 4),
      bias_(bias) {
  CHECK(bias.empty() || static_cast<int>(bias.size()) == shape_.n)
      << bias.size() << " vs " << shape_.n;
  for (const TensorView& part : parts) CHECK_EQ(part.cols, shape_.k);
  const int pw = shape_.panel_width;
  uint8_t* const base = reinterpret_cast<uint8_t*>(packed_.data());
  // Element (kk, j) of panel p is W[p·pw + j][kk] (kernels.h); the buffer starts zeroed, so
  // padding stays zero. Each thread decodes one row of W at a time into its own scratch.
#pragma omp parallel
  {
    std::vector<float> row(shape_.k);  // (in) one row of W as f32
#pragma omp for schedule(static)
    for (int p = 0; p < shape_.num_panels(); ++p) {
      uint8_t* panel = base + p * shape_.panel_bytes();
      if (dtype == WeightDtype::kInt4) {  // Q4_0 / Q4_K blocks copied (worker/int4_pack.h)
        PackInt4Panel(parts, shape_, p, panel);
        continue;
      }
      if (dtype == WeightDtype::kQ6K) {  // Q6_K blocks copied (worker/q6k_pack.h)
        PackQ6KPanel(parts, shape_, p, panel);
        continue;
      }
      const int cols = std::min(pw, shape_.n - p * pw);
      for (int j = 0; j < cols; ++j) {
        int64_t r = static_cast<int64_t>(p) * pw + j;  // row r of the part that holds it
        size_t part = 0;
        while (r >= parts[part].rows) r -= parts[part++].rows;
        const TensorView& view = parts[part];
        if (dtype == WeightDtype::kInt8 && view.type == GgmlType::kQ8_0) {
          PackQ8Column(panel, j, view.row(r));
        } else {
          DequantizeRows(view, r, 1, row.data());
          PackColumn(panel, j, row.data());
        }
      }
    }
  }
  if (shape_.compute_bf16 && !(ForcedEngine() && *ForcedEngine() == MatmulEngine::kOurs)) {
    absl::StatusOr<std::unique_ptr<OneDnnBf16Matmul>> onednn =
        OneDnnBf16Matmul::Create(bf16_panels(), shape_.n, shape_.k, shape_.k_padded,
                                 bias_.empty() ? nullptr : bias_.data(), accumulate_);
    if (!onednn.ok()) {
      LOG_FIRST_N(WARNING, 1) << "oneDNN's bf16 matmul is unavailable (" << onednn.status()
                              << "): every bf16 matmul runs on our kernel";
    } else if (!(*onednn)->uses_caller_layout()) {
      // It would keep a second copy of the weights (AMX's brgemm may want another layout).
      LOG_FIRST_N(WARNING, 1) << "oneDNN (" << (*onednn)->impl_name()
                              << ") cannot read our bf16 panels in place: every bf16 matmul "
                                 "runs on our kernel, to keep one copy of the weights";
    } else {
      onednn_ = *std::move(onednn);
    }
  }
}

void Linear::PackColumn(uint8_t* panel, int j, const float* w) const {
  const int pw = shape_.panel_width, in = shape_.k;
  switch (shape_.dtype) {
    case WeightDtype::kF32: {
      float* f = reinterpret_cast<float*>(panel);
      for (int kk = 0; kk < in; ++kk) f[static_cast<size_t>(kk) * pw + j] = w[kk];
      return;
    }
    case WeightDtype::kBf16: {
      uint16_t* h = reinterpret_cast<uint16_t*>(panel);
      if (shape_.compute_bf16) {
        for (int kk = 0; kk < in; ++kk) h[Bf16PairIndex(kk, j)] = FloatToBf16(w[kk]);
        return;
      }
      const int half = pw / 2, pos = j < half ? 2 * j : 2 * (j - half) + 1;
      for (int kk = 0; kk < in; ++kk) h[static_cast<size_t>(kk) * pw + pos] = FloatToBf16(w[kk]);
      return;
    }
    case WeightDtype::kInt8: {
      constexpr int kB = PackedShape::kInt8Block;
      for (int b = 0; b * kB < in; ++b) {
        const int n = std::min(kB, in - b * kB);
        uint16_t scale;
        int8_t q[kB];
        QuantizeBlock(w + b * kB, n, &scale, q);
        StoreInt8Block(panel, b, j, scale, q, n);
      }
      return;
    }
    case WeightDtype::kInt4:  // packed a panel at a time by PackInt4Panel / PackQ6KPanel
    case WeightDtype::kQ6K:
      LOG(FATAL) << WeightDtypeName(shape_.dtype) << " is not packed by column";
  }
}

void Linear::PackQ8Column(uint8_t* panel, int j, const uint8_t* q8_row) const {
  constexpr int kB = PackedShape::kInt8Block;
  constexpr int kQ8BlockBytes = 2 + kB;  // f16 d | int8 qs[32] (ggml_quant.h)
  for (int b = 0; b * kB < shape_.k; ++b) {
    const uint8_t* block = q8_row + b * kQ8BlockBytes;
    uint16_t scale;
    std::memcpy(&scale, block, 2);
    // llama.cpp writes −127..127; a −128 would overflow the AVX2 kernel's sign trick.
    int8_t q[kB];
    for (int i = 0; i < kB; ++i) q[i] = std::max<int8_t>(static_cast<int8_t>(block[2 + i]), -127);
    StoreInt8Block(panel, b, j, scale, q, kB);
  }
}

void Linear::StoreInt8Block(uint8_t* panel, int b, int j, uint16_t scale, const int8_t* q,
                            int n) const {
  constexpr int kB = PackedShape::kInt8Block;
  const int pw = shape_.panel_width;
  uint8_t* block = panel + static_cast<size_t>(b) * (kB * pw + 2 * pw);
  reinterpret_cast<uint16_t*>(block + kB * pw)[j] = scale;
  const int offset = kernels_.int8_weights_offset ? 128 : 0;
  for (int i = 0; i < n; ++i) {
    block[(i / 4) * 4 * pw + j * 4 + i % 4] = static_cast<uint8_t>(q[i] + offset);
  }
}

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
      if (shape_.compute_bf16) {
        for (int kk = 0; kk < shape_.k; ++kk) out[kk] = Bf16ToFloat(h[Bf16PairIndex(kk, j)]);
        return;
      }
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

void Linear::Run(const float* x, int rows, float* y, int ldy) const {
  const int num_panels = shape_.num_panels();
  if (ldy == 0) ldy = shape_.n;
  const float* bias = bias_.empty() ? nullptr : bias_.data();
  if (shape_.dtype == WeightDtype::kInt8 || shape_.dtype == WeightDtype::kInt4 ||
      shape_.dtype == WeightDtype::kQ6K) {
    // x quantized by row tiles; grows to the largest step once, then never allocates.
    static thread_local std::vector<uint8_t> quantized;
    const int tile = kernels_.int8_row_tile, num_tiles = (rows + tile - 1) / tile;
    const size_t size = static_cast<size_t>(num_tiles) * Int8TileBytes(tile, shape_.k_padded);
    const auto gemm = shape_.dtype == WeightDtype::kInt4  ? kernels_.gemm_int4
                      : shape_.dtype == WeightDtype::kQ6K ? kernels_.gemm_q6k
                                                          : kernels_.gemm_int8;
    if (rows == 1) {
      // A decode's one row: each thread quantizes it into its own copy (a few hundred ns), so
      // no thread waits at a barrier for another's share of the quantizing.
#pragma omp parallel
      {
        static thread_local std::vector<uint8_t> own;
        if (own.size() < size) own.resize(size);
        kernels_.quantize_rows(x, 1, shape_.k, shape_.k_padded, 0, 1, own.data());
        ForThisThreadsPanels(1, num_panels, [&](int begin, int end) {
          gemm(own.data(), 1, bytes(), shape_, begin, end, bias, accumulate_, y, ldy);
        });
      }
      return;
    }
    if (quantized.size() < size) quantized.resize(size);
    uint8_t* const qx = quantized.data();  // thread_local: the OpenMP threads must see this one
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      kernels_.quantize_rows(x, rows, shape_.k, shape_.k_padded, num_tiles * t / nt,
                             num_tiles * (t + 1) / nt, qx);
#pragma omp barrier
      ForThisThreadsPanels(rows, num_panels, [&](int begin, int end) {
        gemm(qx, rows, bytes(), shape_, begin, end, bias, accumulate_, y, ldy);
      });
    }
    return;
  }
  if (shape_.compute_bf16) {
    if (onednn_ == nullptr || Bf16MatmulEngine(rows) == MatmulEngine::kOurs) {
      RunBf16(x, rows, y, ldy);
      return;
    }
    // A chunk oneDNN cannot run (no primitive for a new row count) is left untouched by it, so
    // our kernel takes over from that chunk and y is right either way.
    const int chunk = OneDnnBf16Matmul::kChunkRows;
    for (int r0 = 0; r0 < rows; r0 += chunk) {
      const float* xr = x + static_cast<size_t>(r0) * shape_.k;
      float* yr = y + static_cast<size_t>(r0) * ldy;
      if (absl::Status s = onednn_->Run(xr, std::min(chunk, rows - r0), yr, ldy); !s.ok()) {
        LOG_FIRST_N(ERROR, 1) << "oneDNN's bf16 matmul failed (" << s << "); ours runs instead";
        RunBf16(xr, rows - r0, yr, ldy);
        return;
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
    ForThisThreadsPanels(rows, num_panels, [&](int begin, int end) {
      if (bf16) {
        kernels_.gemm_bf16(px, rows, reinterpret_cast<const uint16_t*>(packed_.data()), shape_,
                           begin, end, bias, accumulate_, y, ldy);
      } else {
        kernels_.gemm_f32(px, rows, packed_.data(), shape_, begin, end, bias, accumulate_, y, ldy);
      }
    });
  }
}

void Linear::RunBf16(const float* x, int rows, float* y, int ldy) const {
  // x rounded to bf16 by row tiles; grows to the largest step once, then never allocates.
  static thread_local std::vector<uint32_t> packed_x;
  const int tile = kernels_.bf16_row_tile, num_tiles = (rows + tile - 1) / tile;
  const size_t words = num_tiles * Bf16TileWords(tile, shape_.k);
  if (packed_x.size() < words) packed_x.resize(words);
  uint32_t* const px = packed_x.data();  // thread_local: the OpenMP threads must see this one
  const int num_panels = shape_.num_panels();
  const float* bias = bias_.empty() ? nullptr : bias_.data();
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    kernels_.pack_rows_bf16(x, rows, shape_.k, num_tiles * t / nt, num_tiles * (t + 1) / nt, px);
#pragma omp barrier
    ForThisThreadsPanels(rows, num_panels, [&](int begin, int end) {
      kernels_.gemm_bf16dot(px, rows, bf16_panels(), shape_, begin, end, bias, accumulate_, y, ldy);
    });
  }
}

}  // namespace pagoda
