#include "router/link/h2_proxy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr int kListenFd = 3;  // in HAProxy: `bind fd@3`
constexpr int kConfigFd = 4;  // in HAProxy: -f /dev/fd/4

// A listening TCP socket on host:port (SO_REUSEADDR, like gRPC's); its port through *bound.
absl::StatusOr<int> Listen(const std::string& host, int port, int* bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on port ", port, ": bad host ", host));
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  const bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                  bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 4096) == 0;
  freeaddrinfo(found);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (!ok || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on port ", port, ": ", strerror(error)));
  }
  *bound = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

// True once whoever accepts on the listening socket `listen_fd` answers an HTTP/2 client
// preface with a frame (HAProxy's SETTINGS) within `timeout`. The kernel accepts connections
// before HAProxy runs: a client that connected then would wait for its SETTINGS instead.
bool AnswersHttp2(int listen_fd, absl::Duration timeout) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    if (in->sin_addr.s_addr == htonl(INADDR_ANY)) in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (addr.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) in6->sin6_addr = in6addr_loopback;
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // The client preface and an empty SETTINGS frame.
  static constexpr char kPreface[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
  char byte = 0;
  pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
  const bool answered =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      write(fd, kPreface, sizeof(kPreface) - 1) == static_cast<ssize_t>(sizeof(kPreface) - 1) &&
      poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 &&
      read(fd, &byte, 1) == 1;
  close(fd);
  return answered;
}

}  // namespace

absl::StatusOr<std::string> ResolveH2Proxy(const std::string& flag) {
  if (flag == "off") return std::string();
  if (flag == "auto") return access(kDefaultHaproxy, X_OK) == 0 ? kDefaultHaproxy : "";
  if (access(flag.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--h2-proxy must be auto, off or an haproxy executable; ", flag, " is not executable"));
  }
  return flag;
}

std::string H2ProxyConfig(const H2ProxyOptions& options) {
  // The deploy sidecar's configuration (deploy/k8s/components/h2-proxy/haproxy.cfg), with the
  // router's own port as the backend and the client's address passed on.
  std::string config = absl::StrFormat(
      R"(global
  maxconn 4096
  tune.bufsize 32768                 # a request's headers, CONTINUATIONs included
  tune.h2.max-concurrent-streams %d # per client connection

defaults
  mode http
  timeout connect 5s
  timeout http-request 10s   # the headers of a request, slowloris included
  timeout client 1h          # streams last as long as a generation
  timeout server 1h
  timeout tunnel 1h

frontend grpc
  bind fd@%d proto h2
  stick-table type ip size 100k expire 60s store http_req_rate(1s),conn_cur
  # This machine's own clients (load generators, probes) pass untracked: they could dial the
  # router's loopback port directly anyway.
  tcp-request connection track-sc0 src unless { src 127.0.0.1 ::1 }
  tcp-request connection reject if { sc_conn_cur(0) gt 64 }
)",
      std::max(1, options.max_streams_per_connection), kListenFd);
  if (options.max_requests_per_s > 0) {
    absl::StrAppendFormat(&config,
                          "  http-request deny deny_status 429 if { sc_http_req_rate(0) gt %d }\n",
                          options.max_requests_per_s);
  }
  absl::StrAppendFormat(&config, R"(  http-request set-header %s %%[src]
  http-request set-header %s %%[src]:%%[src_port]
  default_backend router

backend router
  # A call per backend connection: calls sharing one would stop with the first whose client
  # stops reading (HAProxy reads a connection's frames in order).
  http-reuse never
  server router 127.0.0.1:%d proto h2 maxconn 4096 max-reuse 0
)",
                        kProxyClientHeader, kProxyConnectionHeader, options.backend_port);
  return config;
}

absl::StatusOr<std::unique_ptr<H2Proxy>> H2Proxy::Start(const H2ProxyOptions& options) {
  int port = 0;
  absl::StatusOr<int> listen_fd = Listen(options.host, options.port, &port);
  if (!listen_fd.ok()) return listen_fd.status();
  const int config_fd = memfd_create("pagoda-h2-proxy.cfg", MFD_CLOEXEC);
  const std::string config = H2ProxyConfig(options);
  if (config_fd < 0 ||
      write(config_fd, config.data(), config.size()) != static_cast<ssize_t>(config.size())) {
    close(*listen_fd);
    if (config_fd >= 0) close(config_fd);
    return absl::InternalError("cannot write the HAProxy configuration");
  }
  std::unique_ptr<H2Proxy> proxy(new H2Proxy(options, *listen_fd, config_fd, port));
  if (!proxy->Spawn()) return absl::InternalError("cannot start HAProxy");
  // Serving once HAProxy answers on the port, so no client waits for it; one that exits
  // first (its reason is in the log) fails the start.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!AnswersHttp2(*listen_fd, absl::Milliseconds(100))) {
    int status = 0;
    if (waitpid(proxy->pid_, &status, WNOHANG) == proxy->pid_) {
      proxy->pid_ = -1;
      return absl::InternalError(absl::StrCat(options.haproxy, " exited at start (code ",
                                              WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                              "): see its lines above; --h2-proxy=off serves the "
                                              "port without it"));
    }
    if (absl::Now() > give_up) {
      return absl::InternalError("HAProxy does not answer on the public port after 30 s");
    }
  }
  return proxy;
}

H2Proxy::H2Proxy(H2ProxyOptions options, int listen_fd, int config_fd, int port)
    : options_(std::move(options)), listen_fd_(listen_fd), config_fd_(config_fd), port_(port) {}

H2Proxy::~H2Proxy() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(listen_fd_);
  close(config_fd_);
}

bool H2Proxy::Spawn() {
  const std::string config_path = absl::StrCat("/dev/fd/", kConfigFd);
  std::vector<const char*> argv = {options_.haproxy.c_str(), "-db", "-f", config_path.c_str(),
                                   nullptr};
  lseek(config_fd_, 0, SEEK_SET);
  // Between fork and exec only async-signal-safe calls: the router has threads by now.
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // HAProxy dies with its router, even a killed one
    // dup2 clears close-on-exec: the socket and the configuration are the only fds inherited.
    if (dup2(listen_fd_, kListenFd) < 0 || dup2(config_fd_, kConfigFd) < 0) _exit(127);
    char* const no_env[] = {nullptr};  // the router's secrets stay its own
    execve(argv[0], const_cast<char* const*>(argv.data()), no_env);
    _exit(127);
  }
  if (pid < 0) return false;
  pid_ = pid;
  started_ = absl::Now();
  return true;
}

void H2Proxy::Reap() {
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    LOG(ERROR) << "HAProxy (pid " << pid_ << ") "
               << (WIFEXITED(status) ? absl::StrCat("exited with code ", WEXITSTATUS(status))
                                     : absl::StrCat("was killed by signal ", WTERMSIG(status)))
               << ": the public port " << port_
               << " waits for a new one; the streams it carried are lost";
    pid_ = -1;
  }
  if (pid_ > 0 || absl::Now() - started_ < absl::Seconds(1)) return;
  if (!Spawn()) {
    LOG(ERROR) << "cannot start HAProxy again; retrying";
    started_ = absl::Now();
    return;
  }
  ++num_restarts_;
  LOG(WARNING) << "HAProxy started again (pid " << pid_ << ", restart " << num_restarts_ << ")";
}

}  // namespace pagoda
