// A plain HTTP/1.1 exchange over TCP, for scraping /metrics (pagoda bench) and for tests.
#ifndef PAGODA_COMMON_HTTP_CLIENT_H_
#define PAGODA_COMMON_HTTP_CLIENT_H_

#include <string>

namespace pagoda {

struct HttpResult {
  int status = -1;  // -1: no HTTP answer (cannot connect, or not HTTP)
  std::string body;
};

// Sends `raw_request` as is and reads the reply to the end (the server closes).
HttpResult HttpExchange(const std::string& host, int port, const std::string& raw_request,
                        int timeout_ms = 5000);
HttpResult HttpGet(const std::string& host, int port, const std::string& path);

}  // namespace pagoda

#endif  // PAGODA_COMMON_HTTP_CLIENT_H_
