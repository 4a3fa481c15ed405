// What the HTTP server's loop asks of each request's head (its bytes through the blank line)
// before it reads a byte of the body or reserves any share of the body budget
// (HttpGuardOptions::head_authorized and refusal_headers): whether the head may be served (it
// carries the API key, or asks for an open path: /health, /version, /metrics, a CORS
// preflight), and the CORS header lines of what the loop refuses, so a browser may read the
// refusal. Thread-safe: constant after construction.
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
  // `metrics` may be null.
  HeadGate(std::string api_key, const CorsPolicy* cors, RouterMetrics* metrics);

  // Whether a request with this head may be served; a refusal counts in
  // metrics->refused_api_key.
  bool Authorized(absl::string_view head) const;

  // The CORS header lines ("Name: value\r\n" each) of an answer to a request with this head;
  // "" while CORS is off or for an origin it does not allow.
  std::string RefusalHeaders(absl::string_view head) const;

 private:
  const std::string api_key_;
  const CorsPolicy* const cors_;  // Not owned.
  RouterMetrics* const metrics_;  // Not owned; may be null.
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_HEAD_GATE_H_
