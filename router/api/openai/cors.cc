#include "router/api/openai/cors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pagoda {
namespace {

// How long a browser may cache a preflight's answer (seconds), as Starlette's default.
constexpr char kMaxAge[] = "600";

// An HTTP token (RFC 9110 §5.6.2): what a method or header name may be.
bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(c) || absl::StrContains("!#$%&'*+-.^_`|~", c);
  });
}

// A list a preflight asks for ("content-type, authorization"), safe to echo: tokens only.
bool IsTokenList(absl::string_view s) {
  for (absl::string_view item : absl::StrSplit(s, ',')) {
    if (!IsToken(absl::StripAsciiWhitespace(item))) return false;
  }
  return true;
}

std::vector<std::string> SplitList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

bool HasStar(const std::vector<std::string>& list) {
  return std::find(list.begin(), list.end(), "*") != list.end();
}

}  // namespace

absl::StatusOr<CorsOptions> ParseCorsOptions(absl::string_view origins, absl::string_view methods,
                                             absl::string_view headers, bool allow_credentials) {
  CorsOptions o;
  o.allowed_origins = SplitList(origins);
  for (const std::string& origin : o.allowed_origins) {
    const bool printable =
        std::all_of(origin.begin(), origin.end(), [](char c) { return c > ' ' && c < 0x7f; });
    if (origin != "*" && (!printable || !absl::StrContains(origin, "://"))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allowed-origins: \"", origin, "\" is not * nor an origin (scheme://host[:port])"));
    }
  }
  o.allowed_methods = SplitList(methods);
  o.allowed_headers = SplitList(headers);
  for (const auto* list : {&o.allowed_methods, &o.allowed_headers}) {
    for (const std::string& item : *list) {
      if (!IsToken(item)) {
        return absl::InvalidArgumentError(
            absl::StrCat(list == &o.allowed_methods ? "--allowed-methods" : "--allowed-headers",
                         ": \"", item, "\" is not a method or header name"));
      }
    }
  }
  o.allow_credentials = allow_credentials;
  return o;
}

bool CorsPolicy::Allowed(absl::string_view origin) const {
  if (origin.empty()) return false;
  return std::any_of(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                     [origin](const std::string& o) { return o == "*" || o == origin; });
}

bool CorsPolicy::IsPreflight(absl::string_view request_method, absl::string_view origin,
                             absl::string_view requested_method) const {
  return enabled() && request_method == "OPTIONS" && !origin.empty() && !requested_method.empty();
}

HeaderList CorsPolicy::ResponseHeaders(absl::string_view origin) const {
  HeaderList h;
  if (!enabled() || origin.empty()) return h;
  const bool any = HasStar(options_.allowed_origins);
  // Any origin without credentials is the one answer that does not depend on the origin;
  // with credentials the CORS spec forbids "*", so the origin is echoed.
  if (any && !options_.allow_credentials) {
    h.emplace_back("Access-Control-Allow-Origin", "*");
    return h;
  }
  h.emplace_back("Vary", "Origin");
  if (!Allowed(origin)) return h;
  h.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  if (options_.allow_credentials) h.emplace_back("Access-Control-Allow-Credentials", "true");
  return h;
}

HeaderList CorsPolicy::PreflightHeaders(absl::string_view origin,
                                        absl::string_view requested_method,
                                        absl::string_view requested_headers) const {
  HeaderList h = ResponseHeaders(origin);
  if (!Allowed(origin)) return h;
  // "*" echoes what is asked: a literal "*" is no wildcard to a browser sending credentials.
  if (!HasStar(options_.allowed_methods)) {
    h.emplace_back("Access-Control-Allow-Methods", absl::StrJoin(options_.allowed_methods, ", "));
  } else if (IsToken(requested_method)) {
    h.emplace_back("Access-Control-Allow-Methods", std::string(requested_method));
  }
  if (!HasStar(options_.allowed_headers)) {
    h.emplace_back("Access-Control-Allow-Headers", absl::StrJoin(options_.allowed_headers, ", "));
  } else if (!requested_headers.empty() && IsTokenList(requested_headers)) {
    h.emplace_back("Access-Control-Allow-Headers", std::string(requested_headers));
  }
  h.emplace_back("Access-Control-Max-Age", kMaxAge);
  return h;
}

}  // namespace pagoda
