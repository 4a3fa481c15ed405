// A JSON scanner for text that is still arriving: where one value ends, or that the text so
// far is a valid start of one (so a tool call's arguments can be streamed before they end).
// It checks RFC 8259's syntax and UTF-8 (a whole value it passes, a JSON parser accepts) and
// allocates nothing; nesting deeper than kMaxScanDepth is invalid.
#ifndef PAGODA_ROUTER_API_TOOLS_JSON_SCAN_H_
#define PAGODA_ROUTER_API_TOOLS_JSON_SCAN_H_

#include <cstddef>
#include <string_view>

namespace pagoda {

inline constexpr int kMaxScanDepth = 64;

enum class ScanResult {
  kComplete,    // a whole value; *pos is just past it
  kIncomplete,  // the text ends inside a value that is valid so far
  kInvalid,     // not JSON
};

// Scans one value starting at text[*pos] (leading whitespace skipped).
ScanResult ScanJsonValue(std::string_view text, size_t* pos);

// Advances *pos past JSON whitespace.
void SkipJsonSpace(std::string_view text, size_t* pos);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_TOOLS_JSON_SCAN_H_
