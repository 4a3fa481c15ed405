#include "worker/kv_dtype.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/numeric.h"
#include "glog/logging.h"

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

// max |x_i| over n floats; NaN if any is a NaN.
float AbsMax(const float* x, int n) {
  float max = 0.0f;
  bool nan = false;
  int i = 0;
#if defined(__AVX2__)
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps(), unordered = m;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  nan = _mm256_movemask_ps(unordered) != 0;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  for (float lane : lanes) max = std::max(max, lane);
#endif
  for (; i < n; ++i) {
    nan |= std::isnan(x[i]);
    max = std::max(max, std::fabs(x[i]));
  }
  return nan ? NAN : max;
}

// q = x / scale rounded to nearest even, clamped to ±127; all 0 when inv_scale is 0.
void Quantize(const float* x, int n, float inv_scale, int8_t* q) {
  int i = 0;
#if defined(__AVX2__)
  const __m256 inv = _mm256_set1_ps(inv_scale);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (; i + 16 <= n; i += 16) {
    const __m256 a =
        _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv)));
    const __m256 b =
        _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), inv)));
    // cvtps rounds to nearest even; pack 2×8 int32 → 16 int16 → 16 int8, then undo the lanes.
    const __m256i w = _mm256_packs_epi32(_mm256_cvtps_epi32(a), _mm256_cvtps_epi32(b));
    const __m128i bytes =
        _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                     _mm_shuffle_epi32(bytes, _MM_SHUFFLE(3, 1, 2, 0)));
  }
#endif
  for (; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::nearbyint(std::clamp(x[i] * inv_scale, -127.0f, 127.0f)));
  }
}

// D's sign for element d of a group, as a mask to xor into the float: the parity of a fixed
// hash of d decides.
constexpr uint32_t SignMaskOf(int d) {
  return (std::popcount(static_cast<uint32_t>(d) * 0x9E3779B1u) & 1) != 0 ? 0x80000000u : 0u;
}

// The masks of the first kSignTable elements of a group (groups are head_dim wide at most).
constexpr int kSignTable = 1024;
constexpr std::array<uint32_t, kSignTable> kSignMasks = [] {
  std::array<uint32_t, kSignTable> masks{};
  for (int d = 0; d < kSignTable; ++d) masks[d] = SignMaskOf(d);
  return masks;
}();

// y = D·y over one group of g.
void FlipSigns(float* y, int g) {
  for (int d = 0; d < g; ++d) {
    const uint32_t mask = d < kSignTable ? kSignMasks[d] : SignMaskOf(d);
    y[d] = std::bit_cast<float>(std::bit_cast<uint32_t>(y[d]) ^ mask);
  }
}

// y = H·y / √g over one group of g, a power of two: butterflies y[j], y[j+h] → their sum and
// difference for h = 1, 2, 4, ..., g/2.
void Hadamard(float* y, int g) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(g));
  int h = 1;
#if defined(__AVX2__)
  if (g >= 8) {
    // h = 1, 2, 4 within each vector: lane i becomes its partner's (i ^ h) value plus or minus
    // its own, minus where i has bit h.
    const __m256 minus1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    const __m256 minus2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    const __m256 minus4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    for (int i = 0; i < g; i += 8) {
      __m256 v = _mm256_loadu_ps(y + i);
      v = _mm256_fmadd_ps(v, minus1, _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
      v = _mm256_fmadd_ps(v, minus2, _mm256_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
      v = _mm256_fmadd_ps(v, minus4, _mm256_permute2f128_ps(v, v, 1));
      _mm256_storeu_ps(y + i, v);
    }
    // h = 8, 16, ...: whole vectors.
    for (h = 8; h < g; h *= 2) {
      for (int i = 0; i < g; i += 2 * h) {
        for (int j = i; j < i + h; j += 8) {
          const __m256 a = _mm256_loadu_ps(y + j), b = _mm256_loadu_ps(y + j + h);
          _mm256_storeu_ps(y + j, _mm256_add_ps(a, b));
          _mm256_storeu_ps(y + j + h, _mm256_sub_ps(a, b));
        }
      }
    }
    const __m256 n = _mm256_set1_ps(norm);
    for (int i = 0; i < g; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), n));
    return;
  }
#endif
  for (; h < g; h *= 2) {
    for (int i = 0; i < g; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = y[j], b = y[j + h];
        y[j] = a + b;
        y[j + h] = a - b;
      }
    }
  }
  for (int d = 0; d < g; ++d) y[d] *= norm;
}

// x = R·x (kSignsFirst) or Rᵀ·x, group by group: H is symmetric and D its own inverse.
template <bool kSignsFirst>
void Rotate(float* x, int head_dim) {
  const int g = head_dim & -head_dim;
  for (float* y = x; y < x + head_dim; y += g) {
    if (kSignsFirst) FlipSigns(y, g);
    Hadamard(y, g);
    if (!kSignsFirst) FlipSigns(y, g);
  }
}

void WriteInt8Row(const float* unrotated, int head_dim, int block_size, int offset, void* run) {
  static thread_local std::vector<float> rotated;
  rotated.assign(unrotated, unrotated + head_dim);
  RotateToInt8Basis(rotated.data(), head_dim);
  const float* src = rotated.data();
  auto* q = static_cast<int8_t*>(run) + static_cast<long>(offset) * head_dim;
  auto* scales = reinterpret_cast<uint16_t*>(static_cast<char*>(run) +
                                             static_cast<long>(block_size) * head_dim);
  const float absmax = AbsMax(src, head_dim);
  const uint16_t scale_half = std::isfinite(absmax) ? FloatToHalf(absmax / 127.0f) : 0x7e00;
  const float scale = HalfToFloat(scale_half);
  if (!std::isfinite(scale)) {  // NaN or inf in the row, or max|x| past f16's range
    std::memset(q, 0, head_dim);
    const uint16_t nan = 0x7e00;
    std::memcpy(scales + offset, &nan, sizeof(nan));
    return;
  }
  // The stored (f16) scale, not absmax / 127: q · scale is then the closest a row can be.
  Quantize(src, head_dim, scale > 0.0f ? 1.0f / scale : 0.0f, q);
  std::memcpy(scales + offset, &scale_half, sizeof(scale_half));
}

}  // namespace

void RotateToInt8Basis(float* x, int head_dim) { Rotate<true>(x, head_dim); }

void RotateFromInt8Basis(float* x, int head_dim) { Rotate<false>(x, head_dim); }

const char* KvLayoutName(KvDtype dtype) {
  return dtype == KvDtype::kInt8 ? "int8-hadamard" : KvDtypeName(dtype);
}

void ConvertFromFloat(const float* src, int n, KvDtype dtype, void* dst) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::kBf16:
      return ToBf16(src, n, static_cast<uint16_t*>(dst));
    case KvDtype::kF16:
      return ToF16(src, n, static_cast<uint16_t*>(dst));
    case KvDtype::kInt8:
      break;
  }
  LOG(FATAL) << "ConvertFromFloat: no elementwise conversion to " << KvDtypeName(dtype);
}

void WriteKvRow(const float* src, int head_dim, KvDtype dtype, int block_size, int offset,
                void* run) {
  if (dtype == KvDtype::kInt8) return WriteInt8Row(src, head_dim, block_size, offset, run);
  ConvertFromFloat(
      src, head_dim, dtype,
      static_cast<char*>(run) + static_cast<long>(offset) * KvRowBytes(dtype, head_dim));
}

void ReadKvRow(const void* run, int head_dim, KvDtype dtype, int block_size, int offset,
               float* dst) {
  const char* row = static_cast<const char*>(run) +
                    static_cast<long>(offset) *
                        (dtype == KvDtype::kInt8 ? head_dim : KvRowBytes(dtype, head_dim));
  for (int d = 0; d < head_dim; ++d) {
    switch (dtype) {
      case KvDtype::kF32:
        std::memcpy(&dst[d], row + 4 * d, 4);
        break;
      case KvDtype::kBf16:
      case KvDtype::kF16: {
        uint16_t h;
        std::memcpy(&h, row + 2 * d, 2);
        dst[d] = dtype == KvDtype::kBf16 ? Bf16ToFloat(h) : HalfToFloat(h);
        break;
      }
      case KvDtype::kInt8: {
        uint16_t scale;
        std::memcpy(
            &scale,
            static_cast<const char*>(run) + static_cast<long>(block_size) * head_dim + 2 * offset,
            2);
        dst[d] = static_cast<int8_t>(row[d]) * HalfToFloat(scale);
        break;
      }
    }
  }
  if (dtype == KvDtype::kInt8) RotateFromInt8Basis(dst, head_dim);
}

}  // namespace pagoda
