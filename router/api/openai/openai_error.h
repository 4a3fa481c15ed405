// OpenAI's error object, {"error": {"message", "type", "param", "code"}}, made in one place for
// every answer of the HTTP API: a core status becomes an HTTP status, OpenAI's `type` for it,
// the field it names (`param`) and OpenAI's string `code` ("invalid_value",
// "context_length_exceeded", "model_not_found", ...). Plain functions; thread-safe.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_ERROR_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pagoda {

// OpenAI's codes for a bad field (400).
inline constexpr char kInvalidValue[] = "invalid_value";  // out of range, or malformed
inline constexpr char kInvalidType[] = "invalid_type";    // a number where a string belongs...
inline constexpr char kMissingRequired[] = "missing_required_parameter";
inline constexpr char kUnsupportedParameter[] = "unsupported_parameter";  // known, not served
inline constexpr char kContextLengthExceeded[] = "context_length_exceeded";

struct OpenAiError {
  int http_status = 500;
  std::string message;
  std::string param;  // the field at fault; "" is null
  std::string code;   // "" is null

  // OpenAI's `type` for the HTTP status: "invalid_request_error" for 4xx but 401
  // ("authentication_error"), 404 ("not_found_error") and 429 ("rate_limit_error");
  // "service_unavailable_error" for 503 and "server_error" for other 5xx.
  const char* type() const;
  // The JSON text {"error": {...}}.
  std::string Body() const;
};

// An error of `http_status`; an empty `code` becomes the status's own: 400 "invalid_value",
// 401 "invalid_api_key", 404 "not_found", 413 "request_too_large", 429 "rate_limit_exceeded",
// 503 "service_unavailable", other 5xx "internal_error", other 4xx "invalid_request".
OpenAiError MakeOpenAiError(int http_status, std::string message, std::string param = "",
                            std::string code = "");

// `status` (INVALID_ARGUMENT) carrying OpenAI's `code` for it, which ErrorOf reports; the tag
// survives RETURN_IF_ERROR and InOpenAiFieldNames. Other statuses are returned unchanged.
absl::Status WithOpenAiCode(absl::Status status, absl::string_view code);
// A bad request field: INVALID_ARGUMENT "FIELD: WHY", tagged with OpenAI's `code` for it.
absl::Status BadField(absl::string_view field, absl::string_view why,
                      absl::string_view code = kInvalidValue);

// The error for a failed status: INVALID_ARGUMENT and FAILED_PRECONDITION are 400 with the
// field their message starts with ("temperature: ...", "n = 0: ...") as `param`, and the code
// they were tagged with, else "context_length_exceeded" when the prompt and output cannot fit
// (the message speaks of the model length or the KV blocks), else "invalid_value";
// RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, UNAUTHENTICATED 401, NOT_FOUND 404, others 500, with
// their status's code (MakeOpenAiError).
OpenAiError ErrorOf(const absl::Status& status);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_ERROR_H_
