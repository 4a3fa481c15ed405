// A minimal HTTP/1.1 server for read-only endpoints such as Prometheus' GET /metrics: one
// thread, one connection at a time, `Connection: close`. Requests are capped at 8 KiB and 2 s;
// anything but GET of a known path gets 404 or 405.
#ifndef PAGODA_COMMON_HTTP_SERVER_H_
#define PAGODA_COMMON_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace pagoda {

struct HttpResponse {
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  int status = 200;  // 200 or 503 (e.g. /health while not ready)
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;

  // Listens on host:port (port 0: any free one) and serves `handlers` by path.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           std::map<std::string, Handler> handlers);
  ~HttpServer();  // stops serving

  int port() const { return port_; }

 private:
  HttpServer(int fd, int port, std::map<std::string, Handler> handlers);
  void Serve();
  void Answer(int client);

  const int fd_;
  const int port_;
  const std::map<std::string, Handler> handlers_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_HTTP_SERVER_H_
