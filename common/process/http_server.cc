#include "common/process/http_server.h"

#include "absl/strings/str_cat.h"
#include "common/process/guarded_http_server.h"

namespace pagoda {
namespace {

// Scrapes are small and rare: a few threads serve them (slow clients hold none, see
// GuardedHttpServer), and a request has no body.
HttpGuardOptions ScrapeLimits() {
  HttpGuardOptions o;
  o.threads = 4;
  o.head.max_body_bytes = 8192;
  o.head_timeout = absl::Seconds(5);
  o.write_timeout = absl::Seconds(5);
  o.max_waiting_connections = 1024;
  o.max_chunked_in_flight = 0;
  return o;
}

}  // namespace

void UseExclusivePort(httplib::Server* server) {
  // httplib's default is SO_REUSEPORT, with which a second process binds a port in use and
  // takes half its connections: SO_REUSEADDR alone lets a restart reuse the port, no more.
  server->set_socket_options([](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& host, int port, std::map<std::string, Handler> handlers) {
  auto server = std::make_unique<GuardedHttpServer>(ScrapeLimits());
  UseExclusivePort(server.get());
  // Every request is answered here, before httplib's routing (which would give a known path
  // 404 for a method it has no handler for).
  server->set_pre_routing_handler(
      [handlers = std::move(handlers)](const httplib::Request& req, httplib::Response& res) {
        const auto it = handlers.find(req.path);
        if (it == handlers.end()) {
          res.status = 404;
          res.set_content("not found\n", "text/plain");
        } else if (req.method != "GET" && req.method != "HEAD") {
          res.status = 405;
          res.set_content("only GET\n", "text/plain");
        } else {
          HttpResponse r = it->second();
          res.status = r.status;
          res.set_content(std::move(r.body), r.content_type.c_str());
        }
        return httplib::Server::HandlerResponse::Handled;
      });
  int bound = -1;
  if (port == 0) {
    bound = server->bind_to_any_port(host);
  } else if (server->bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(server), bound));
}

HttpServer::HttpServer(std::unique_ptr<GuardedHttpServer> server, int port)
    : server_(std::move(server)), port_(port) {
  // The socket listens already: connections wait in its backlog until the loop accepts them.
  thread_ = server_->ListenInBackground();
}

HttpServer::~HttpServer() {
  server_->stop();
  thread_.join();
}

}  // namespace pagoda
