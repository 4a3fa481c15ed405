#include "router/api/openai/head_gate.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/process/http_head.h"
#include "common/process/secret.h"

namespace pagoda {

HeadGate::HeadGate(std::string api_key, const CorsPolicy* cors, RouterMetrics* metrics)
    : api_key_(std::move(api_key)), cors_(cors), metrics_(metrics) {}

bool HeadGate::Authorized(absl::string_view head) const {
  if (api_key_.empty()) return true;
  const absl::string_view auth = HttpHeaderValue(head, "Authorization");
  if (BearerMatches(std::string_view(auth.data(), auth.size()), api_key_)) return true;
  // "METHOD target HTTP/1.1": the path is the target without its query.
  const absl::string_view line = head.substr(0, head.find("\r\n"));
  const size_t space = line.find(' ');
  const absl::string_view method = line.substr(0, space);
  absl::string_view path = space == absl::string_view::npos ? "" : line.substr(space + 1);
  path = path.substr(0, std::min(path.find(' '), path.find('?')));
  if (path == "/health" || path == "/version" || path == "/metrics" ||
      cors_->IsPreflight(method, HttpHeaderValue(head, "Origin"),
                         HttpHeaderValue(head, "Access-Control-Request-Method"))) {
    return true;
  }
  if (metrics_ != nullptr) metrics_->refused_api_key->Add();
  return false;
}

std::string HeadGate::RefusalHeaders(absl::string_view head) const {
  std::string lines;
  for (const auto& [name, value] : cors_->ResponseHeaders(HttpHeaderValue(head, "Origin"))) {
    absl::StrAppend(&lines, name, ": ", value, "\r\n");
  }
  return lines;
}

}  // namespace pagoda
