// What the HTTP server's loop asks of each request's head (its bytes through the blank line)
// before it reads a byte of the body or reserves any share of the body budget
// (HttpGuardOptions::head_authorized and refusal_headers): whether the head may be served (it
// carries the API key, or asks for an open path: /health, /version, /metrics, a CORS
// preflight), and the header lines of what the loop refuses: CORS's, so a browser may read the
// refusal, and for the web page's paths `WWW-Authenticate: Basic realm="pagoda"`, so it asks
// for the key. The page's GETs take the key as HTTP Basic's password too (a browser cannot send
// a bearer header when it navigates); the API's paths take the bearer header only, since a
// browser would attach remembered Basic credentials to another site's forged request.
// Thread-safe: constant after construction.
#ifndef PAGODA_ROUTER_API_OPENAI_HEAD_GATE_H_
#define PAGODA_ROUTER_API_OPENAI_HEAD_GATE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "router/api/openai/cors.h"
#include "router/core/router_metrics.h"

namespace pagoda {

class HeadGate {
 public:
  // `api_key` "": every head passes. `cors` and `metrics` are not owned and outlive the gate;
  // `metrics` may be null. `web_ui`: the page is served (WebUi::IsPagePath).
  HeadGate(std::string api_key, const CorsPolicy* cors, RouterMetrics* metrics,
           bool web_ui = false);

  // Whether a request with this head may be served; a refusal counts in
  // metrics->refused_api_key.
  bool Authorized(absl::string_view head) const;

  // The header lines ("Name: value\r\n" each) of a refusal of a request with this head: CORS's
  // for an allowed origin, and WWW-Authenticate for a page path without the key.
  std::string RefusalHeaders(absl::string_view head) const;

 private:
  bool KeyMatches(absl::string_view head) const;
  bool IsPageGet(absl::string_view head) const;

  const std::string api_key_;
  const CorsPolicy* const cors_;  // Not owned.
  RouterMetrics* const metrics_;  // Not owned; may be null.
  const bool web_ui_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_HEAD_GATE_H_
