// One HTTP GET on cpp-httplib, for scraping /metrics (pagoda bench --metrics) and for tests.
#ifndef PAGODA_COMMON_PROCESS_HTTP_CLIENT_H_
#define PAGODA_COMMON_PROCESS_HTTP_CLIENT_H_

#include <string>

namespace pagoda {

struct HttpResult {
  int status = -1;  // -1: no HTTP answer (cannot connect, timed out, or not HTTP)
  std::string body;
  std::string content_type;
};

// GET http://host:port/path; each of connecting, writing and every read waits at most
// `timeout_ms`.
HttpResult HttpGet(const std::string& host, int port, const std::string& path,
                   int timeout_ms = 5000);

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_CLIENT_H_
