#include "common/process/http_head.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace pagoda {

namespace {

// Calls visit(name, value) for each header field of a head whose blank line ends at `end`
// until it returns false; whether every field was visited.
template <typename Visit>
bool ForEachField(absl::string_view data, size_t end, Visit visit) {
  // The first line is the request line; each further one up to the blank line a field.
  size_t line = data.find("\r\n") + 2;
  while (line < end + 2) {
    const size_t line_end = data.find("\r\n", line);
    const absl::string_view field = data.substr(line, line_end - line);
    line = line_end + 2;
    const size_t colon = field.find(':');
    if (colon == absl::string_view::npos) {
      if (!visit(absl::string_view(), absl::string_view())) return false;  // httplib skips it
      continue;
    }
    if (!visit(field.substr(0, colon), absl::StripAsciiWhitespace(field.substr(colon + 1)))) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::string_view HttpHeaderValue(absl::string_view head, absl::string_view name) {
  const size_t end = head.find("\r\n\r\n");
  if (end == absl::string_view::npos) return {};
  absl::string_view found;
  ForEachField(head, end, [&](absl::string_view n, absl::string_view value) {
    if (!absl::EqualsIgnoreCase(n, name)) return true;
    found = value;
    return false;
  });
  return found;
}

HeadScan ScanHttpHead(absl::string_view data, const HttpHeadLimits& limits, HttpHead* head) {
  const size_t end = data.find("\r\n\r\n");
  if (end == absl::string_view::npos) {
    return data.size() >= limits.max_head_bytes ? HeadScan::kTooLarge : HeadScan::kIncomplete;
  }
  *head = HttpHead();
  head->head_bytes = end + 4;
  if (head->head_bytes > limits.max_head_bytes) return HeadScan::kTooLarge;
  bool sized = false, chunked = false;
  int fields = 0;
  HeadScan failed = HeadScan::kComplete;
  ForEachField(data, end, [&](absl::string_view name, absl::string_view value) {
    if (++fields > limits.max_fields) {
      failed = HeadScan::kTooLarge;
    } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      uint64_t length = 0;
      if (sized || value.empty() || !absl::ascii_isdigit(value[0]) ||
          !absl::SimpleAtoi(value, &length)) {
        failed = HeadScan::kBad;
      }
      sized = true;
      head->content_length = length;
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      // httplib decodes exactly "chunked"; anything else it would read to the connection's end.
      if (chunked || !absl::EqualsIgnoreCase(value, "chunked")) failed = HeadScan::kBad;
      chunked = true;
    } else if (absl::EqualsIgnoreCase(name, "Expect")) {
      // The one expectation HTTP/1.1 defines (RFC 9110 10.1.1); any other cannot be met.
      if (!absl::EqualsIgnoreCase(value, "100-continue")) failed = HeadScan::kBadExpectation;
      head->expect_continue = true;
    }
    return failed == HeadScan::kComplete;
  });
  if (failed != HeadScan::kComplete) return failed;
  if (sized && chunked) return HeadScan::kBad;  // the classic request-smuggling ambiguity
  if (chunked) head->body = HttpHead::Body::kChunked;
  if (sized) {
    if (head->content_length > limits.max_body_bytes) return HeadScan::kBodyTooLarge;
    head->body = HttpHead::Body::kSized;
  }
  return HeadScan::kComplete;
}

}  // namespace pagoda
