// GBNF for the decimal integers in a range (JSON Schema's minimum / maximum on an integer),
// with no leading zeros, at most 16 digits, built digit by digit rather than listed, so the
// grammar stays a few rules whatever the range.
#ifndef PAGODA_LIB_GRAMMAR_INTEGER_RANGE_H_
#define PAGODA_LIB_GRAMMAR_INTEGER_RANGE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace pagoda {

// The integers n with lo <= n <= hi (an absent bound is open); |bounds| < 1e16, lo <= hi.
std::string IntegerRangeGbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_INTEGER_RANGE_H_
