// Scalar conversions between float32 and the 16-bit floats models are stored in (IEEE f16,
// bfloat16). Out of line on purpose: kernel sources compiled for other ISAs include headers
// that include this one, and an inline function could be emitted with their instructions.
#ifndef PAGODA_COMMON_NUMERIC_H_
#define PAGODA_COMMON_NUMERIC_H_

#include <cstdint>

namespace pagoda {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);  // round to nearest even

}  // namespace pagoda

#endif  // PAGODA_COMMON_NUMERIC_H_
