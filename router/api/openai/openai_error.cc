#include "router/api/openai/openai_error.h"

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "common/json.h"

namespace pagoda {
namespace {

// Where a status carries its OpenAI code (absl::Status payloads are keyed by a type URL).
constexpr char kCodePayload[] = "type.pagoda/openai.error.code";

// The field an INVALID_ARGUMENT message starts with: "temperature: ..." or "n = 0: ...".
std::string NamedField(const std::string& message) {
  size_t end = 0;
  while (end < message.size() &&
         (absl::ascii_isalnum(message[end]) || message[end] == '_' || message[end] == '.')) {
    ++end;
  }
  const bool named = end > 0 && end < message.size() &&
                     (message[end] == ':' || message.compare(end, 2, " =") == 0);
  return named ? message.substr(0, end) : "";
}

}  // namespace

const char* OpenAiError::type() const {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return http_status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string OpenAiError::Body() const {
  auto or_null = [](const std::string& s) {
    return s.empty() ? OrderedJson(nullptr) : OrderedJson(s);
  };
  return JsonDump(OrderedJson{{"error",
                               {{"message", message},
                                {"type", type()},
                                {"param", or_null(param)},
                                {"code", or_null(code)}}}});
}

absl::Status WithOpenAiCode(absl::Status status, absl::string_view code) {
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    status.SetPayload(kCodePayload, absl::Cord(code));
  }
  return status;
}

absl::Status BadField(absl::string_view field, absl::string_view why, absl::string_view code) {
  return WithOpenAiCode(absl::InvalidArgumentError(absl::StrCat(field, ": ", why)), code);
}

OpenAiError MakeOpenAiError(int http_status, std::string message, std::string param,
                            std::string code) {
  if (code.empty()) {
    switch (http_status) {
      case 400:
        code = kInvalidValue;
        break;
      case 401:
        code = "invalid_api_key";
        break;
      case 404:
        code = "not_found";
        break;
      case 413:
        code = "request_too_large";
        break;
      case 429:
        code = "rate_limit_exceeded";
        break;
      case 503:
        code = "service_unavailable";
        break;
      default:
        code = http_status >= 500 ? "internal_error" : "invalid_request";
    }
  }
  return OpenAiError{http_status, std::move(message), std::move(param), std::move(code)};
}

OpenAiError ErrorOf(const absl::Status& status) {
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition: {
      std::string param = NamedField(message);
      std::string code;
      if (absl::optional<absl::Cord> tag = status.GetPayload(kCodePayload)) {
        code = std::string(*tag);
      } else if (absl::StrContains(message, "model length") ||
                 absl::StrContains(message, "KV blocks")) {
        // The core's words for a prompt (+ max_tokens) that cannot fit (request_policy,
        // Engine, Scheduler::CheckFits): the gRPC API keeps INVALID_ARGUMENT for them.
        code = kContextLengthExceeded;
      }
      return MakeOpenAiError(400, std::move(message), std::move(param), std::move(code));
    }
    case absl::StatusCode::kResourceExhausted:
      return MakeOpenAiError(429, std::move(message));
    case absl::StatusCode::kUnavailable:
      return MakeOpenAiError(503, std::move(message));
    case absl::StatusCode::kUnauthenticated:
      return MakeOpenAiError(401, std::move(message));
    case absl::StatusCode::kNotFound:
      return MakeOpenAiError(404, std::move(message));
    default:
      return MakeOpenAiError(500, std::move(message));
  }
}

}  // namespace pagoda
