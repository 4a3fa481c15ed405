// LoRA's two low-rank products for one ISA (worker/packed_lora.h): shrink, t = x · Aᵀ, and
// expand, y += t · B'. A (rank, in) and B' (rank, out) are row-major and unpadded, in f32 or
// bf16 (widened as loaded): a rank-16 adapter reads exactly its 16 · (in + out) values, where
// Linear's panels would pad the rank to a panel's width in A and to 32 in B (twice the bytes on
// AVX-512). Rows are read and written where they are (`rows` indexes x and y), so an adapter's
// scattered decode rows need no gather. Each row's sums run in one order whatever rows share
// the call: a sequence's update is the same alone or batched.
#include <cstdint>

#include "worker/kernels/elements.h"
#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

// Rows per register tile: 4 rows × 2 ranks (shrink) or 4 rows × 2 vectors (expand) of
// accumulators.
constexpr int kRows = 4;

// t[i][k] for the M rows x[0..M) and ranks k0, k1 (k1 may equal k0 for an odd last rank).
template <class W, int M>
void ShrinkTile(const float* const* x, const typename W::Elem* a0, const typename W::Elem* a1,
                int in, float* s0, float* s1) {
  V acc0[M], acc1[M];
  for (int r = 0; r < M; ++r) acc0[r] = acc1[r] = Zero();
  int i = 0;
  for (; i + kWidth <= in; i += kWidth) {
    const V w0 = W::LoadRow(a0 + i), w1 = W::LoadRow(a1 + i);
    for (int r = 0; r < M; ++r) {
      const V v = Load(x[r] + i);
      acc0[r] = Fma(v, w0, acc0[r]);
      acc1[r] = Fma(v, w1, acc1[r]);
    }
  }
  for (int r = 0; r < M; ++r) {
    float sum0 = ReduceAdd(acc0[r]), sum1 = ReduceAdd(acc1[r]);
    for (int j = i; j < in; ++j) {
      sum0 += x[r][j] * W::LoadOne(a0 + j);
      sum1 += x[r][j] * W::LoadOne(a1 + j);
    }
    s0[r] = sum0;
    s1[r] = sum1;
  }
}

template <class W, int M>
void ShrinkRows(const LoraMatrix& a, const float* const* x, int k_begin, int k_end, float* t) {
  const auto* w = static_cast<const typename W::Elem*>(a.data);
  const int rank = a.rows, in = a.cols;
  for (int k = k_begin; k < k_end; k += 2) {
    const int k1 = k + 1 < k_end ? k + 1 : k;
    float s0[M], s1[M];
    ShrinkTile<W, M>(x, w + static_cast<size_t>(k) * in, w + static_cast<size_t>(k1) * in, in, s0,
                     s1);
    for (int r = 0; r < M; ++r) {
      t[r * rank + k] = s0[r];
      t[r * rank + k1] = s1[r];
    }
  }
}

template <class W>
void Shrink(const LoraMatrix& a, const float* x, int ldx, const int* rows, int n, int k_begin,
            int k_end, float* t) {
  for (int r0 = 0; r0 < n; r0 += kRows) {
    const float* xr[kRows];
    const int m = MinInt(kRows, n - r0);
    for (int r = 0; r < m; ++r) xr[r] = x + static_cast<size_t>(rows[r0 + r]) * ldx;
    float* tr = t + static_cast<size_t>(r0) * a.rows;
    switch (m) {
      case 4:
        ShrinkRows<W, 4>(a, xr, k_begin, k_end, tr);
        break;
      case 3:
        ShrinkRows<W, 3>(a, xr, k_begin, k_end, tr);
        break;
      case 2:
        ShrinkRows<W, 2>(a, xr, k_begin, k_end, tr);
        break;
      default:
        ShrinkRows<W, 1>(a, xr, k_begin, k_end, tr);
        break;
    }
  }
}

// y[r][j0, j0 + C·kWidth) += Σ_k t[r][k] · b[k][...] for the M rows, C vectors of columns.
template <class W, int M, int C>
void ExpandTile(const typename W::Elem* b, int rank, int out, const float* t, float* const* y,
                int j0) {
  V acc[M][C];
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = Load(y[r] + j0 + c * kWidth);
  }
  for (int k = 0; k < rank; ++k) {
    V w[C];
    for (int c = 0; c < C; ++c)
      w[c] = W::LoadRow(b + static_cast<size_t>(k) * out + j0 + c * kWidth);
    for (int r = 0; r < M; ++r) {
      const V tk = Set1(t[r * rank + k]);
      for (int c = 0; c < C; ++c) acc[r][c] = Fma(tk, w[c], acc[r][c]);
    }
  }
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < C; ++c) Store(y[r] + j0 + c * kWidth, acc[r][c]);
  }
}

template <class W, int M>
void ExpandRows(const LoraMatrix& b, const float* t, float* const* y, int j_begin, int j_end) {
  const auto* w = static_cast<const typename W::Elem*>(b.data);
  const int rank = b.rows, out = b.cols;
  int j = j_begin;
  for (; j + 2 * kWidth <= j_end; j += 2 * kWidth) ExpandTile<W, M, 2>(w, rank, out, t, y, j);
  for (; j + kWidth <= j_end; j += kWidth) ExpandTile<W, M, 1>(w, rank, out, t, y, j);
  for (; j < j_end; ++j) {  // the columns past the last vector, each in the vectors' order
    for (int r = 0; r < M; ++r) {
      float sum = y[r][j];
      for (int k = 0; k < rank; ++k) {
        sum =
            __builtin_fmaf(t[r * rank + k], W::LoadOne(w + static_cast<size_t>(k) * out + j), sum);
      }
      y[r][j] = sum;
    }
  }
}

template <class W>
void Expand(const LoraMatrix& b, const float* t, const int* rows, int n, int j_begin, int j_end,
            float* y, int ldy) {
  for (int r0 = 0; r0 < n; r0 += kRows) {
    float* yr[kRows];
    const int m = MinInt(kRows, n - r0);
    for (int r = 0; r < m; ++r) yr[r] = y + static_cast<size_t>(rows[r0 + r]) * ldy;
    const float* tr = t + static_cast<size_t>(r0) * b.rows;
    switch (m) {
      case 4:
        ExpandRows<W, 4>(b, tr, yr, j_begin, j_end);
        break;
      case 3:
        ExpandRows<W, 3>(b, tr, yr, j_begin, j_end);
        break;
      case 2:
        ExpandRows<W, 2>(b, tr, yr, j_begin, j_end);
        break;
      default:
        ExpandRows<W, 1>(b, tr, yr, j_begin, j_end);
        break;
    }
  }
}

}  // namespace

void LoraShrink(const LoraMatrix& a, const float* x, int ldx, const int* rows, int n, int k_begin,
                int k_end, float* t) {
  if (a.bf16) {
    Shrink<Bf16>(a, x, ldx, rows, n, k_begin, k_end, t);
  } else {
    Shrink<F32>(a, x, ldx, rows, n, k_begin, k_end, t);
  }
}

void LoraExpand(const LoraMatrix& b, const float* t, const int* rows, int n, int j_begin, int j_end,
                float* y, int ldy) {
  if (b.bf16) {
    Expand<Bf16>(b, t, rows, n, j_begin, j_end, y, ldy);
  } else {
    Expand<F32>(b, t, rows, n, j_begin, j_end, y, ldy);
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda
