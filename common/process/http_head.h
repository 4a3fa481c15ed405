// The framing of one HTTP/1.1 request head, read before any thread serves the request: where
// the head ends, how long its body is, and whether the head stays within the limits. What
// httplib parses later is the same bytes; this only decides how many of them to wait for.
#ifndef PAGODA_COMMON_PROCESS_HTTP_HEAD_H_
#define PAGODA_COMMON_PROCESS_HTTP_HEAD_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace pagoda {

struct HttpHeadLimits {
  size_t max_head_bytes = 16 << 10;  // request line and header fields, with the blank line
  int max_fields = 100;              // header fields
  uint64_t max_body_bytes = 32 << 20;
};

struct HttpHead {
  enum class Body { kNone, kSized, kChunked };
  size_t head_bytes = 0;  // through the blank line
  Body body = Body::kNone;
  uint64_t content_length = 0;  // kSized
  // `Expect: 100-continue`: the client sends its body once told to (an interim
  // "100 Continue"), or after a wait of its own (curl: 1 s).
  bool expect_continue = false;
};

enum class HeadScan {
  kIncomplete,  // no blank line yet, and still within max_head_bytes
  kComplete,
  kTooLarge,      // the head passes max_head_bytes or max_fields (431)
  kBodyTooLarge,  // Content-Length over max_body_bytes (413)
  kBad,  // unreadable framing: a bad or repeated Content-Length, with Transfer-Encoding (400)
  kBadExpectation,  // an Expect other than 100-continue (417)
};

// Scans the bytes received so far of one request (`data` starts with its request line).
HeadScan ScanHttpHead(absl::string_view data, const HttpHeadLimits& limits, HttpHead* head);

// The value of the first header field `name` (case-insensitive) of a complete head, without
// the whitespace around it; empty when there is none.
absl::string_view HttpHeaderValue(absl::string_view head, absl::string_view name);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_HEAD_H_
