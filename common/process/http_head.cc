#include "common/process/http_head.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace pagoda {

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
  // The first line is the request line; each further one up to the blank line a field.
  size_t line = data.find("\r\n") + 2;
  while (line < end + 2) {
    const size_t line_end = data.find("\r\n", line);
    const absl::string_view field = data.substr(line, line_end - line);
    line = line_end + 2;
    if (++fields > limits.max_fields) return HeadScan::kTooLarge;
    const size_t colon = field.find(':');
    if (colon == absl::string_view::npos) continue;  // httplib skips it too
    const absl::string_view name = field.substr(0, colon);
    const absl::string_view value = absl::StripAsciiWhitespace(field.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      uint64_t length = 0;
      if (sized || value.empty() || !absl::ascii_isdigit(value[0]) ||
          !absl::SimpleAtoi(value, &length)) {
        return HeadScan::kBad;
      }
      sized = true;
      head->content_length = length;
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      // httplib decodes exactly "chunked"; anything else it would read to the connection's end.
      if (chunked || !absl::EqualsIgnoreCase(value, "chunked")) return HeadScan::kBad;
      chunked = true;
    }
  }
  if (sized && chunked) return HeadScan::kBad;  // the classic request-smuggling ambiguity
  if (chunked) head->body = HttpHead::Body::kChunked;
  if (sized) {
    if (head->content_length > limits.max_body_bytes) return HeadScan::kBodyTooLarge;
    head->body = HttpHead::Body::kSized;
  }
  return HeadScan::kComplete;
}

}  // namespace pagoda
