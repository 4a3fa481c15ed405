// The prefill attention kernel in f32 (attention_prefill.h has its tile loop), for both ISAs.
//
// Each score is Σ_d k[d]·q[d] summed in order of d, then times 1/√head_dim: the same whatever the
// tile's rows, so a chunk's rows do not depend on how the prompt is cut into chunks. It rounds
// otherwise than attention_kernel.cc's (which sums lanes of head_dim), so a sequence's rows use
// one kernel or the other for a whole step (paged_attention.cc chooses by its rows).
#include "worker/kernels/attention_prefill.h"

namespace pagoda {
namespace PAGODA_ISA {
namespace {

// Keys scored per pass and output dims per P·V pass: accumulators that fit the registers (32
// zmm, 16 ymm) beside the operand loaded.
constexpr int kKeysPerPass = kWidth == 16 ? 16 : 8;
constexpr int kDimsPerPass = kWidth == 16 ? 16 : 8;

struct F32Math {
  static long QWords(int hd) { return static_cast<long>(hd) * kWidth; }

  // Lane `lane` of a unit's q: q[d][lane] = q_row[d] (0 without a row).
  static void StoreQ(const float* q_row, int hd, int lane, float* q) {
    for (int d = 0; d < hd; ++d) q[d * kWidth + lane] = q_row != nullptr ? q_row[d] : 0.0f;
  }

  // K and V rows as f32 (keys, hd).
  template <typename T>
  static void Block(const typename T::Elem* k_pool, const typename T::Elem* v_pool, long at,
                    int keys, int hd, int bs, float* k_wide, float* v_wide, const void** kb,
                    const void** vb) {
    const float* k;
    const float* v;
    RowsOf<T>(k_pool, v_pool, at, keys, hd, bs, k_wide, v_wide, &k, &v);
    *kb = k;
    *vb = v;
  }

  // s[j] (lanes: rows) = (Σ_d k_j[d] · qt[d]) · scale for N keys (k: rows of hd), d in order.
  // HD: hd known at compile time (0: not), so that the N keys' elements are one register plus
  // constant offsets (else N registers, more than x86-64 has).
  template <int N, int HD>
  [[gnu::always_inline]] static void ScorePass(const float* qt, const float* k, int hd_arg, V scale,
                                               float* s) {
    const int hd = HD > 0 ? HD : hd_arg;
    V a[N];
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) a[j] = Zero();
    for (int d = 0; d < hd; ++d) {
      const V q = Load(qt + d * kWidth);
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j) a[j] = Fma(Set1(k[j * hd + d]), q, a[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) Store(s + j * kWidth, Mul(a[j], scale));
  }

  // ot[d] (lanes: rows) = ot[d] · c + Σ_{j<n} p_j · v_j[d] for the N dims from d0.
  template <int N>
  [[gnu::always_inline]] static void ValuePass(const float* p, const float* v, int n, int hd,
                                               int d0, V c, float* ot) {
    V a[N];
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) a[i] = Mul(Load(ot + (d0 + i) * kWidth), c);
    for (int j = 0; j < n; ++j) {
      const V pj = Load(p + j * kWidth);
      const float* vj = v + static_cast<long>(j) * hd + d0;
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) a[i] = Fma(Set1(vj[i]), pj, a[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i) Store(ot + (d0 + i) * kWidth, a[i]);
  }

  // One unit against the first n keys of a block: scores into s, the merge into ml and ot.
  template <int HD>
  static void Merge(const float* qt, const void* k_rows, const void* v_rows, int n, int hd,
                    int hide, V scale, float* s, float* ml, float* ot) {
    const float* kb = static_cast<const float*>(k_rows);
    const float* vb = static_cast<const float*>(v_rows);
    int j = 0;
    if constexpr (kKeysPerPass == 16) {
      for (; j + 16 <= n; j += 16) ScorePass<16, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    }
    for (; j + 8 <= n; j += 8) ScorePass<8, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    for (; j + 4 <= n; j += 4) ScorePass<4, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    for (; j < n; ++j) ScorePass<1, HD>(qt, kb + j * hd, hd, scale, s + j * kWidth);
    const V c = Softmax(s, n, hide, ml);
    int d = 0;
    for (; d + kDimsPerPass <= hd; d += kDimsPerPass) {
      ValuePass<kDimsPerPass>(s, vb, n, hd, d, c, ot);
    }
    for (; d + 4 <= hd; d += 4) ValuePass<4>(s, vb, n, hd, d, c, ot);
    for (; d < hd; ++d) ValuePass<1>(s, vb, n, hd, d, c, ot);
  }
};

}  // namespace

void AttentionPrefill(const AttentionTile& t) { PrefillTile<F32Math>(t); }

}  // namespace PAGODA_ISA
}  // namespace pagoda
