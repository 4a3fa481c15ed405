// --h2-proxy: the HAProxy that tools/setup.sh installs, in front of the router's public gRPC
// port (issue 38, item 6). gRPC 1.51 (Debian 12) bounds neither HTTP/2 rapid reset
// (CVE-2023-44487: measured +3.8 GB and honest calls timing out) nor endless CONTINUATION
// frames; HAProxy does, with the configuration of the deploy manifests' sidecar
// (deploy/k8s/components/h2-proxy/haproxy.cfg): a header block past 32 KiB ends the connection,
// requests past 200 a second from one address get 429 (gRPC: UNAVAILABLE), more than 64
// connections from one address are refused. 127.0.0.1 and ::1 are not limited: this machine's
// load generators and probes could dial the router's loopback port directly anyway (a flood
// test stands in for other hosts from 127.0.0.2 and up). On by default where installed.
//
// The router binds the public port itself and hands the listening socket to HAProxy (its
// `bind fd@3`): the port's errors are the router's, port 0 works, and a restarted HAProxy
// takes the same socket, so connections made while it restarts wait in the backlog instead of
// being refused. HAProxy forwards to the router's own server on a loopback port, each call on a
// backend connection of its own (`max-reuse 0`): HAProxy 2.6 reads a backend connection's
// frames in order, so calls sharing one stop together when one's client stops reading (a slow
// reader that reads its calls one after the other then never finishes). The client's address
// and connection travel in x-pagoda-client and x-pagoda-connection (gRPC does not speak PROXY).
//
// Supervision: HAProxy dies with the router (PR_SET_PDEATHSIG); when it dies first, Reap logs
// it and starts it again (at most once a second): the socket is the router's, so the port never
// closes, and a router that exited instead would drop every stream in flight of its workers
// too. running() is false until then; the router is not ready meanwhile.
//
// Thread-compatible: Start and Reap on one thread that outlives the child (PR_SET_PDEATHSIG
// fires when the forking thread ends); the destructor kills HAProxy.
#ifndef PAGODA_ROUTER_LINK_H2_PROXY_H_
#define PAGODA_ROUTER_LINK_H2_PROXY_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pagoda {

// The metadata keys HAProxy sets (a client's own values are replaced): the client's address,
// and its connection's (address:port).
inline constexpr char kProxyClientHeader[] = "x-pagoda-client";
inline constexpr char kProxyConnectionHeader[] = "x-pagoda-connection";
// Where --h2-proxy=auto looks for HAProxy (Debian's package).
inline constexpr char kDefaultHaproxy[] = "/usr/sbin/haproxy";

// More concurrent calls per client connection let a rapid-reset flood hold more of the
// router's calls at once: at 256 the sanitizer build grew by 120 MB under H2GuardTest's flood
// (the bound is 100), at 100 it stays within it.
inline constexpr int kMaxProxiedStreamsPerConnection = 100;

struct H2ProxyOptions {
  std::string haproxy = kDefaultHaproxy;  // the executable
  std::string host = "0.0.0.0";           // the public port's address
  int port = 0;                           // the public port; 0: any free one (port())
  int backend_port = 0;                   // the router's own server, on 127.0.0.1
  int max_requests_per_s = 200;           // per client address; 0: no limit
  // Concurrent calls on one client connection (SETTINGS_MAX_CONCURRENT_STREAMS). The router
  // passes its --max-streams-per-connection, capped at kMaxProxiedStreamsPerConnection.
  int max_streams_per_connection = kMaxProxiedStreamsPerConnection;
};

// What --h2-proxy's value means: "auto" (HAProxy when kDefaultHaproxy is installed, else none),
// "off", or the path of an haproxy executable. The executable to run, or "" for none;
// INVALID_ARGUMENT for a path that is not executable.
absl::StatusOr<std::string> ResolveH2Proxy(const std::string& flag);

// The HAProxy configuration for `options` (the listening socket is fd 3).
std::string H2ProxyConfig(const H2ProxyOptions& options);

class H2Proxy {
 public:
  // Binds and listens on host:port, starts HAProxy on that socket and returns once it answers
  // there (the kernel accepts before HAProxy runs: a client would wait for it). UNAVAILABLE
  // when the port cannot be bound (the message says "cannot listen"), INTERNAL when HAProxy
  // cannot be forked, exits at start or does not answer within 30 s.
  static absl::StatusOr<std::unique_ptr<H2Proxy>> Start(const H2ProxyOptions& options);
  ~H2Proxy();  // kills HAProxy and closes the port

  int port() const { return port_; }  // the public port bound
  pid_t pid() const { return pid_; }  // HAProxy's, -1 while it is down
  bool running() const { return pid_ > 0; }

  // Collects an HAProxy that exited, logging how, and starts it again once a second has
  // passed since the last start. Call it periodically.
  void Reap();

 private:
  H2Proxy(H2ProxyOptions options, int listen_fd, int config_fd, int port);
  bool Spawn();  // false when fork fails

  const H2ProxyOptions options_;
  const int listen_fd_;  // the public port, shared with every HAProxy started
  const int config_fd_;  // a memfd holding H2ProxyConfig
  const int port_;
  pid_t pid_ = -1;
  absl::Time started_ = absl::InfinitePast();
  int num_restarts_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_H2_PROXY_H_
