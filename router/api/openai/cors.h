// Cross-origin resource sharing for browser clients of the HTTP API, with vLLM's knobs
// (--allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials). Off unless
// origins are given: then no response carries an Access-Control-* header. Plain value type;
// thread-safe once built.
#ifndef PAGODA_ROUTER_API_OPENAI_CORS_H_
#define PAGODA_ROUTER_API_OPENAI_CORS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pagoda {

struct CorsOptions {
  std::vector<std::string> allowed_origins;          // empty: CORS off; "*": any origin
  std::vector<std::string> allowed_methods = {"*"};  // "*": whatever a preflight asks
  std::vector<std::string> allowed_headers = {"*"};  // "*": whatever a preflight asks
  bool allow_credentials = false;                    // cookies and Authorization from browsers
};

// The options from the flags' comma-separated lists (spaces around items ignored).
// INVALID_ARGUMENT for an origin that is not "*" nor scheme://host[:port], or a method or
// header name that is not an HTTP token: each is echoed into a response header.
absl::StatusOr<CorsOptions> ParseCorsOptions(absl::string_view origins, absl::string_view methods,
                                             absl::string_view headers, bool allow_credentials);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class CorsPolicy {
 public:
  explicit CorsPolicy(CorsOptions options) : options_(std::move(options)) {}

  bool enabled() const { return !options_.allowed_origins.empty(); }

  // Whether `request_method` is a preflight: OPTIONS with an Origin and an
  // Access-Control-Request-Method, while CORS is on. It is answered 204 without an API key
  // (browsers send none on a preflight).
  bool IsPreflight(absl::string_view request_method, absl::string_view origin,
                   absl::string_view requested_method) const;

  // The headers of an ordinary response to a request from `origin` (its Origin header, "" when
  // none): Access-Control-Allow-Origin (and -Allow-Credentials) when the origin is allowed;
  // Vary: Origin whenever the answer depends on it. None while CORS is off.
  HeaderList ResponseHeaders(absl::string_view origin) const;

  // The headers of a preflight's 204: those of ResponseHeaders, and, for an allowed origin,
  // Access-Control-Allow-Methods and -Allow-Headers (the asked ones when "*") and -Max-Age.
  HeaderList PreflightHeaders(absl::string_view origin, absl::string_view requested_method,
                              absl::string_view requested_headers) const;

 private:
  bool Allowed(absl::string_view origin) const;

  const CorsOptions options_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_CORS_H_
