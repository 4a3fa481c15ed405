// A JSON scanner for text that is still arriving: where one value ends, or that the text so
// far is a valid start of one (so a tool call's arguments can be streamed before they end).
// It checks RFC 8259's syntax and UTF-8 (a whole value it passes, a JSON parser accepts) and
// allocates nothing; nesting deeper than kMaxScanDepth is invalid.
#ifndef PAGODA_ROUTER_API_OPENAI_TOOLS_JSON_SCAN_H_
#define PAGODA_ROUTER_API_OPENAI_TOOLS_JSON_SCAN_H_

#include <cstddef>
#include <cstdint>
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

// ScanJsonValue for text that grows between calls (a stream's output): each call reads only
// the bytes that came since the last, so a value scanned once per token costs its length once,
// not once per token. Same results as ScanJsonValue on the same text. A few dozen bytes.
class JsonScanner {
 public:
  // The value that starts at `start` (whitespace before it is skipped).
  explicit JsonScanner(size_t start) : i_(start) {}

  // Scans on through `text`, which must extend the text of the previous calls. kComplete sets
  // *end past the value; once kComplete or kInvalid, later calls return the same.
  ScanResult Scan(std::string_view text, size_t* end);

 private:
  enum class State : uint8_t {
    kValue,      // a value may start (after whitespace)
    kFirst,      // just inside { or [: the close, a key or a value
    kKey,        // an object's key string must come
    kColon,      // after a key
    kAfterItem,  // after a container's item: , or the close
    kString,
    kNumber,
    kLiteral,
    kDone,
  };
  // A value ended just before text[i]: the whole scan, or its container's next state.
  void ValueDone(size_t i);

  size_t i_;  // the next byte to read
  State state_ = State::kValue;
  ScanResult result_ = ScanResult::kIncomplete;
  size_t end_ = 0;
  uint64_t objects_ = 0;  // bit d: the container at depth d is an object
  int depth_ = 0;         // containers open
  bool key_ = false;      // the string is an object's key
  uint8_t escape_ = 0;    // 1: after a backslash; 2..5: hex digits of \u still to come, + 1
  uint8_t utf8_ = 0;      // continuation bytes still to come
  uint8_t lo_ = 0x80, hi_ = 0xbf;  // the next continuation byte's range
  uint8_t number_ = 0;             // where in a number (json_scan.cc)
  const char* word_ = nullptr;     // true, false or null
  uint8_t word_at_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_TOOLS_JSON_SCAN_H_
