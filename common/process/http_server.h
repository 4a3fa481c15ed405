// A small HTTP/1.1 server for read-only endpoints such as Prometheus' GET /metrics and /health,
// on GuardedHttpServer (cpp-httplib): slow and idle clients hold no thread, a request is read
// within 5 s and each piece of its reply written within 5 s. GET and HEAD of a known path run its
// handler; another method there gets 405, an unknown path 404, a malformed request 400.
//
// Thread-safety: handlers run on the pool's threads, possibly several at once.
#ifndef PAGODA_COMMON_PROCESS_HTTP_SERVER_H_
#define PAGODA_COMMON_PROCESS_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace pagoda {

class GuardedHttpServer;

struct HttpResponse {
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  int status = 200;  // 200 or 503 (e.g. /health while not ready)
};

// Makes `server` refuse a port another process listens on (httplib's default shares it).
void UseExclusivePort(httplib::Server* server);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;

  // Listens on host:port (port 0: any free one) and serves `handlers` by path. UNAVAILABLE
  // when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           std::map<std::string, Handler> handlers);
  ~HttpServer();  // stops serving; requests in progress finish first

  int port() const { return port_; }

 private:
  HttpServer(std::unique_ptr<GuardedHttpServer> server, int port);

  const std::unique_ptr<GuardedHttpServer> server_;
  const int port_;
  std::thread thread_;  // runs the accept loop
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_SERVER_H_
