// One request's bytes, as httplib's parser reads them (an httplib::Stream): the head and sized
// body GuardedHttpServer's loop has buffered, then end of input (what follows belongs to the
// next request). A chunked body reads on from the socket, within a byte limit and a deadline;
// replies are written with a timeout per send.
//
// Thread-safety: used by one thread, the one serving the request.
#ifndef PAGODA_COMMON_PROCESS_HTTP_REQUEST_STREAM_H_
#define PAGODA_COMMON_PROCESS_HTTP_REQUEST_STREAM_H_

#include <httplib.h>

#include <string>

#include "absl/time/time.h"

namespace pagoda {

// Whether `fd` has one of `events` (or an error or hang-up) within `timeout`.
bool WaitFor(int fd, short events, absl::Duration timeout);

class HttpRequestStream final : public httplib::Stream {
 public:
  // Serves buf[0, limit); limit npos: all of `buf`, then the socket (a chunked body), at most
  // `max_socket_bytes` of it by `deadline`. `buf` is not owned and outlives the stream.
  HttpRequestStream(int fd, const std::string& buf, size_t limit, uint64_t max_socket_bytes,
                    absl::Time deadline, absl::Duration write_timeout);

  bool failed() const { return failed_; }    // a read failed, timed out or was cut off
  bool cut_off() const { return cut_off_; }  // the chunked body passed max_socket_bytes

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  const int fd_;
  const std::string& buf_;
  const size_t limit_;  // of buf_: the request's bytes
  const bool chunked_;
  const uint64_t max_socket_bytes_;
  const absl::Time deadline_;
  const absl::Duration write_timeout_;
  size_t pos_ = 0;
  uint64_t socket_bytes_ = 0;
  bool failed_ = false;
  bool cut_off_ = false;
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_PROCESS_HTTP_REQUEST_STREAM_H_
