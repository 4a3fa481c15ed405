#include "worker/kv_dtype.h"

#include <immintrin.h>

#include <cstring>

#include "common/numeric.h"

namespace pagoda {
namespace {

void ToBf16(const float* src, int n, uint16_t* dst) {
  int i = 0;
#if defined(__AVX2__)
  // FloatToBf16, 8 at a time: add 0x7fff plus the lowest kept bit, keep the top half; NaNs
  // keep their top half with the quiet bit set.
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(top, one))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    // Narrow the eight 32-bit lanes (all < 2^16) to 16 bits, in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void ToF16(const float* src, int n, uint16_t* dst) {
#if defined(__F16C__)
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
#else
  for (int i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
#endif
}

}  // namespace

int KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

void ConvertFromFloat(const float* src, int n, KvDtype dtype, void* dst) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::kBf16:
      return ToBf16(src, n, static_cast<uint16_t*>(dst));
    case KvDtype::kF16:
      return ToF16(src, n, static_cast<uint16_t*>(dst));
  }
}

}  // namespace pagoda
