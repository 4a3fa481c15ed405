#include "router/link/h2_proxy.h"

#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(H2ProxyTest, TheFlagIsAutoOffOrAnExecutable) {
  EXPECT_EQ(ResolveH2Proxy("off").value(), "");
  EXPECT_EQ(ResolveH2Proxy("auto").value(),
            access(kDefaultHaproxy, X_OK) == 0 ? kDefaultHaproxy : "");
  const absl::StatusOr<std::string> missing = ResolveH2Proxy("/nonexistent/haproxy");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("--h2-proxy"));
  EXPECT_EQ(ResolveH2Proxy("/bin/true").value(), "/bin/true");
}

TEST(H2ProxyTest, TheConfigurationBoundsFloodsAndPassesTheClientOn) {
  const std::string config = H2ProxyConfig({.backend_port = 41234, .max_requests_per_s = 150});
  EXPECT_THAT(config, HasSubstr("bind fd@3 proto h2"));
  EXPECT_THAT(config, HasSubstr("tune.bufsize 32768"));  // a header block past it ends it
  EXPECT_THAT(config, HasSubstr("sc_http_req_rate(0) gt 150"));
  EXPECT_THAT(config, HasSubstr("sc_conn_cur(0) gt 64"));
  EXPECT_THAT(config, HasSubstr(std::string("set-header ") + kProxyClientHeader + " %[src]"));
  EXPECT_THAT(config, HasSubstr(std::string("set-header ") + kProxyConnectionHeader +
                                " %[src]:%[src_port]"));
  // A call per backend connection: calls sharing one stop with the first unread one.
  EXPECT_THAT(config, HasSubstr("server router 127.0.0.1:41234 proto h2 maxconn 4096 max-reuse 0"));
  EXPECT_THAT(H2ProxyConfig({.backend_port = 1, .max_requests_per_s = 0}),
              Not(HasSubstr("http_req_rate(0) gt")));
  // Calls per client connection: 100 unless the router allows fewer.
  EXPECT_THAT(config, HasSubstr("tune.h2.max-concurrent-streams 100 "));
  EXPECT_THAT(H2ProxyConfig({.backend_port = 1, .max_streams_per_connection = 16}),
              HasSubstr("tune.h2.max-concurrent-streams 16 "));
}

}  // namespace
}  // namespace pagoda
