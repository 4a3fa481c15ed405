// One client connection of a GuardedHttpServer, as its loop and pool threads hand it between
// them (one owner at a time): the socket, the bytes received and not yet served (the current
// request's first, then any pipelined after it), what the loop learned of the current request's
// head, and the share of the body budget it holds. Owns the socket: closed on destruction.
#ifndef PAGODA_COMMON_PROCESS_HTTP_CONNECTION_H_
#define PAGODA_COMMON_PROCESS_HTTP_CONNECTION_H_

#include <string>

#include "absl/time/time.h"
#include "common/process/body_budget.h"
#include "common/process/http_head.h"

namespace pagoda {

struct HttpConnection {
  explicit HttpConnection(int fd) : fd(fd) {}
  ~HttpConnection();  // shuts the socket down and closes it
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Whether the current request's body has not all arrived (a chunked one: not read yet).
  // REQUIRES: head_done.
  bool BodyPending() const;

  // Takes the current request's sized body out of `buf`, which keeps the head and any bytes of
  // the next request. The body stays where it was received (moved to the front in place): no
  // second buffer of its size. REQUIRES: head_done, a sized body, all of it in `buf`.
  std::string TakeBody();

  const int fd;
  std::string buf;      // received and not yet served: the current request's bytes first
  absl::Time since;     // when it started waiting for its current request (eviction order)
  absl::Time deadline;  // the loop closes it then
  absl::Time body_start;
  bool started = false;  // a byte of the current request has arrived
  bool head_done = false;
  HttpHead head;
  BodyBudget::Share share;  // what this request holds of the bodies in flight
  bool draining = false;    // refused: what arrives is dropped until the drain time passes
  int served = 0;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_CONNECTION_H_
