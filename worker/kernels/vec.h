// The vector type of one ISA, for kernel sources that are compiled once per ISA (CMake builds
// each of them with -march=x86-64-v3 and again with -march=x86-64-v4, defining PAGODA_ISA to
// avx2 or avx512). Only such sources include this file; everything here lives in
// pagoda::PAGODA_ISA, so the two builds never share a symbol (tests/worker/kernel_symbols_test.sh
// checks that the AVX-512 objects define nothing outside their namespace). For the same reason
// kernel sources use no std:: templates: an out-of-line copy built for AVX-512 could be the one
// the linker keeps for the whole program.
#ifndef PAGODA_WORKER_KERNELS_VEC_H_
#define PAGODA_WORKER_KERNELS_VEC_H_

#include <immintrin.h>

#ifndef PAGODA_ISA
#error "compile kernel sources through pagoda_kernel_library (worker/CMakeLists.txt)"
#endif

namespace pagoda {
namespace PAGODA_ISA {

#if defined(__AVX512F__)
using V = __m512;
constexpr int kWidth = 16;
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V Set1(float x) { return _mm512_set1_ps(x); }
inline V Zero() { return _mm512_setzero_ps(); }
inline V Add(V a, V b) { return _mm512_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V Div(V a, V b) { return _mm512_div_ps(a, b); }
inline V Max(V a, V b) { return _mm512_max_ps(a, b); }
inline V Min(V a, V b) { return _mm512_min_ps(a, b); }
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a·b + c
inline V Fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a·b
inline float ReduceAdd(V v) { return _mm512_reduce_add_ps(v); }
inline V RoundNearest(V v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// The four sums of a0..a3's lanes, as [sum a0, sum a1, sum a2, sum a3].
inline __m128 Reduce4(V a0, V a1, V a2, V a3) {
  const auto fold = [](V v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  };
  const __m256 h =
      _mm256_hadd_ps(_mm256_hadd_ps(fold(a0), fold(a1)), _mm256_hadd_ps(fold(a2), fold(a3)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
// 2^n for integral-valued n in [-126, 127].
inline V Pow2(V n) {
  const __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(i, 23));
}
#else
using V = __m256;
constexpr int kWidth = 8;
inline V Load(const float* p) { return _mm256_loadu_ps(p); }
inline void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V Set1(float x) { return _mm256_set1_ps(x); }
inline V Zero() { return _mm256_setzero_ps(); }
inline V Add(V a, V b) { return _mm256_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V Div(V a, V b) { return _mm256_div_ps(a, b); }
inline V Max(V a, V b) { return _mm256_max_ps(a, b); }
inline V Min(V a, V b) { return _mm256_min_ps(a, b); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V Fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
inline float ReduceAdd(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline V RoundNearest(V v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline __m128 Reduce4(V a0, V a1, V a2, V a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
inline V Pow2(V n) {
  const __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(i, 23));
}
#endif

// e^x, Cephes-style 2^n · p(r) with relative error ~1e-7; inputs clamped to [-87, 88].
inline V Exp(V x) {
  x = Min(Max(x, Set1(-87.0f)), Set1(88.0f));
  const V n = RoundNearest(Mul(x, Set1(1.44269504f)));
  V r = Fnma(n, Set1(0.693359375f), x);
  r = Fnma(n, Set1(-2.12194440e-4f), r);
  V p = Set1(1.9875691500e-4f);
  p = Fma(p, r, Set1(1.3981999507e-3f));
  p = Fma(p, r, Set1(8.3334519073e-3f));
  p = Fma(p, r, Set1(4.1665795894e-2f));
  p = Fma(p, r, Set1(1.6666665459e-1f));
  p = Fma(p, r, Set1(5.0000001201e-1f));
  p = Fma(p, Mul(r, r), Add(r, Set1(1.0f)));
  // 2^n in two halves so n = 128 (x near 88) does not overflow the exponent field.
  const V half = RoundNearest(Mul(n, Set1(0.5f)));
  return Mul(Mul(p, Pow2(half)), Pow2(Sub(n, half)));
}

inline int MinInt(int a, int b) { return a < b ? a : b; }
inline float MaxFloat(float a, float b) { return a > b ? a : b; }

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_VEC_H_
