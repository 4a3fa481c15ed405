#include "common/process/http_refusal.h"

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

// The error `code` and `type` as OpenAI's error object spells them
// (router/api/openai/openai_error.h, which this layer cannot see: it serves workers' metrics too).
const char* ErrorCode(int status) {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "invalid_api_key";
    case 413:
      return "request_too_large";
    case 417:
      return "expectation_failed";
    case 431:
      return "headers_too_large";
    default:
      return "service_unavailable";
  }
}

}  // namespace

std::string HttpRefusal(int status, absl::string_view message, absl::string_view extra_headers) {
  const std::string body =
      absl::StrCat(R"({"error": {"message": ")", message, R"(", "type": ")",
                   status >= 500 ? "service_unavailable_error" : "invalid_request_error",
                   R"(", "param": null, "code": ")", ErrorCode(status), R"("}})");
  return absl::StrCat("HTTP/1.1 ", status, " ", Reason(status),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n", extra_headers, "\r\n", body);
}

}  // namespace pagoda
