#include "router/api/openai/head_gate.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/process/http_head.h"
#include "common/process/secret.h"
#include "router/api/web/web_ui.h"

namespace pagoda {
namespace {

struct RequestLine {
  absl::string_view method;
  absl::string_view path;  // without its query
};

// "METHOD target HTTP/1.1": the path is the target without its query.
RequestLine ParseRequestLine(absl::string_view head) {
  const absl::string_view line = head.substr(0, head.find("\r\n"));
  const size_t space = line.find(' ');
  absl::string_view path = space == absl::string_view::npos ? "" : line.substr(space + 1);
  path = path.substr(0, std::min(path.find(' '), path.find('?')));
  return {line.substr(0, space), path};
}

std::string_view View(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace

HeadGate::HeadGate(std::string api_key, const CorsPolicy* cors, RouterMetrics* metrics, bool web_ui)
    : api_key_(std::move(api_key)), cors_(cors), metrics_(metrics), web_ui_(web_ui) {}

bool HeadGate::IsPageGet(absl::string_view head) const {
  const RequestLine line = ParseRequestLine(head);
  return web_ui_ && (line.method == "GET" || line.method == "HEAD") &&
         WebUi::IsPagePath(View(line.path));
}

bool HeadGate::KeyMatches(absl::string_view head) const {
  const std::string_view auth = View(HttpHeaderValue(head, "Authorization"));
  return BearerMatches(auth, api_key_) || (IsPageGet(head) && BasicPasswordMatches(auth, api_key_));
}

bool HeadGate::Authorized(absl::string_view head) const {
  if (api_key_.empty() || KeyMatches(head)) return true;
  const RequestLine line = ParseRequestLine(head);
  if (line.path == "/health" || line.path == "/version" || line.path == "/metrics" ||
      cors_->IsPreflight(line.method, HttpHeaderValue(head, "Origin"),
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
  if (!api_key_.empty() && IsPageGet(head) && !KeyMatches(head)) {
    absl::StrAppend(&lines, "WWW-Authenticate: Basic realm=\"pagoda\", charset=\"UTF-8\"\r\n");
  }
  return lines;
}

}  // namespace pagoda
