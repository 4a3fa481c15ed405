// The running softmax states an attention kernel keeps in an AttentionTile's scratch (kernels.h):
// m (states floats), l (states), then the unnormalised outputs (states × head_dim), state
// s = (row − row_begin) · heads + query head offset. For kernel sources compiled once per ISA
// (the rules of vec.h).
#ifndef PAGODA_WORKER_KERNELS_ATTENTION_STATES_H_
#define PAGODA_WORKER_KERNELS_ATTENTION_STATES_H_

#include "worker/kernels/kernels.h"
#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {

// Empty states (m = −∞, l = 0, outputs 0) unless the tile resumes earlier blocks' states.
inline void StartStates(const AttentionTile& t, int states, float* m) {
  if (t.resume) return;
  for (int s = 0; s < states; ++s) m[s] = -__builtin_inff();
  float* l = m + states;
  for (long i = 0; i < states + static_cast<long>(states) * t.head_dim; ++i) l[i] = 0.0f;
}

// Each state's outputs over its l into the tile's rows of `out`, if the tile finishes; `heads`
// are the tile's query heads (its KV heads times the group).
inline void FinishStates(const AttentionTile& t, int heads, const float* l, const float* acc) {
  if (!t.finish) return;
  const int hd = t.head_dim, group = t.num_heads / t.num_kv_heads;
  const int out_stride = t.num_heads * hd;
  const int states = (t.row_end - t.row_begin) * heads;
  for (int s = 0; s < states; ++s) {
    const int r = t.row_begin + s / heads, i = s % heads;
    const float inv = 1.0f / l[s];
    float* dst = t.out + static_cast<long>(r) * out_stride + (t.head_begin * group + i) * hd;
    const float* o = acc + static_cast<long>(s) * hd;
    for (int d = 0; d < hd; ++d) dst[d] = o[d] * inv;
  }
}

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_ATTENTION_STATES_H_
