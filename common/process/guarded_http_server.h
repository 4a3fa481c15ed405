// An httplib::Server whose connections cost no thread until a request has fully arrived.
//
// cpp-httplib 0.11 gives each connection a pool thread from accept to close and reads with a
// timeout per recv, so a client that sends a header byte every few seconds, or sits idle
// between keep-alive requests, holds a thread: a few hundred such connections starve every
// honest one. It also grows a header line, the header list and a chunked body without bound.
// Here one poll loop reads every connection's request head, and its body when it is sized,
// within limits on bytes, header fields and time; only a complete request goes to a pool
// thread, which runs httplib's parser and handlers on the buffered bytes (process_request
// with our Stream), and gives the connection back to the loop to wait for the next one.
//
//   accept ──► loop: head ≤ 16 KiB, ≤ 100 fields, by head_timeout; sized body by its deadline,
//              within the bytes-in-flight budget ──► pool thread: httplib parse + handler
//        ◄── keep-alive: back to the loop (pipelined requests already buffered go first)
//
// A request the loop refuses is answered there (400, 401, 408 by closing, 413, 417, 431, 503)
// and its connection closed. Every head is checked (head_authorized: the API key) before a
// byte of its body is read or any share of the body budget is reserved. One that asks
// `Expect: 100-continue` gets its "100 Continue" from the loop once its head passed every check
// (size, key, budget), so the client sends its body at once rather than after a timeout of its
// own. Accepted sockets have TCP_NODELAY. A chunked body is read by the pool
// thread within the same byte and time bounds; at most `max_chunked_in_flight` at once. Range
// headers are ignored (a full 200). When the loop holds max_waiting_connections, a new connection
// closes the oldest waiting one: a flood of idle or slow connections cannot keep an honest client
// out.
//
// Thread-safety: handlers run on the pool's threads, several at once. Configure the server
// (routes, handlers) before it listens. httplib's own new_task_queue, keep-alive and read
// timeout settings are not used (the options here are); its write timeout is this one.
#ifndef PAGODA_COMMON_PROCESS_GUARDED_HTTP_SERVER_H_
#define PAGODA_COMMON_PROCESS_GUARDED_HTTP_SERVER_H_

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/process/http_head.h"

namespace pagoda {

struct HttpGuardOptions {
  HttpHeadLimits head;
  int threads = 4;                     // requests served at once (a streaming reply holds one)
  int max_waiting_connections = 4096;  // connections between requests or mid-read
  int max_requests_per_connection = 1000;
  absl::Duration head_timeout = absl::Seconds(10);  // a request's head, from its first byte
  absl::Duration idle_timeout = absl::Seconds(5);   // between keep-alive requests
  double min_body_bytes_per_second = 1 << 20;       // a body's deadline grows with its size
  // Bodies over 64 KiB read at once; a request holds about 3-4x its body at its peak (the
  // buffer, which the request takes over, then the JSON parser's token and the value it
  // builds), so 128 MiB bounds them at ~0.5 GiB.
  uint64_t max_body_bytes_in_flight = 128 << 20;
  int max_chunked_in_flight = 4;
  absl::Duration write_timeout = absl::Seconds(30);  // each send of a reply
  // Whether a request's head (the bytes through the blank line) carries what the handler will
  // ask for, such as an API key. When it does not, the loop answers 401 before it reads the
  // body or reserves its share of max_body_bytes_in_flight (a client without the key cannot
  // hold the budget), and a client waiting for "100 Continue" never sends its body. Null: every
  // head passes.
  std::function<bool(absl::string_view head)> head_authorized;
  // Header lines (each ending "\r\n") added to what the loop answers a request whose head it
  // read (401, 413, 503): CORS's, so a browser may read the refusal. Null: none.
  std::function<std::string(absl::string_view head)> refusal_headers;
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(HttpGuardOptions options);
  ~GuardedHttpServer() override;  // Shutdown()

  // httplib's, with a listen backlog of SOMAXCONN rather than 5: a burst of connections (an
  // attack's) must not make an honest client's SYN wait for a retransmit.
  bool listen_after_bind();
  // listen_after_bind() on a thread of its own, returned once the server runs (or the listen
  // failed): httplib's stop() is a no-op until then, so a server stopped at once would never
  // stop, and joining its thread would hang.
  std::thread ListenInBackground();

  // After stop(): closes waiting connections and joins the pool (requests in progress end).
  void Shutdown();

  // For a handler: whether the client of the request this thread serves has hung up (a
  // non-streaming call then stops generating). False off a pool thread.
  static bool ClientGone();
  // Whether the request this thread serves was cut off at the body limit (a chunked body
  // that passed it): httplib reports it as 400, the error handler may say 413.
  static bool BodyCutOff();

 private:
  class Loop;
  bool process_and_close_socket(socket_t sock) override;

  std::unique_ptr<Loop> loop_;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_GUARDED_HTTP_SERVER_H_
