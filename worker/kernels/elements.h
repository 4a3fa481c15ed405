// How an element type of a kernel's operands loads as f32, for kernel sources compiled once per
// ISA (the rules of vec.h): kWidth elements at a time (LoadRow) or one (LoadOne). Paged
// attention reads K/V in each; LoRA's products read their matrices in F32 or Bf16.
#ifndef PAGODA_WORKER_KERNELS_ELEMENTS_H_
#define PAGODA_WORKER_KERNELS_ELEMENTS_H_

#include <cstdint>

#include "worker/kernels/vec.h"

namespace pagoda {
namespace PAGODA_ISA {

struct F32 {
  using Elem = float;
  static V LoadRow(const float* p) { return Load(p); }
  static float LoadOne(const float* p) { return *p; }
};

// bf16 is the top half of an f32: zero-extend to 32 bits and shift left by 16.
struct Bf16 {
  using Elem = uint16_t;
#if defined(__AVX512F__)
  static V LoadRow(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#else
  static V LoadRow(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
  static float LoadOne(const uint16_t* p) {
    return __builtin_bit_cast(float, static_cast<uint32_t>(*p) << 16);
  }
};

// IEEE half: vcvtph2ps (F16C, in both x86-64-v3 and v4).
struct F16 {
  using Elem = uint16_t;
#if defined(__AVX512F__)
  static V LoadRow(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
#else
  static V LoadRow(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
#endif
  static float LoadOne(const uint16_t* p) { return _cvtsh_ss(*p); }
};

}  // namespace PAGODA_ISA
}  // namespace pagoda

#endif  // PAGODA_WORKER_KERNELS_ELEMENTS_H_
