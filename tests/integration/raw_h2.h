// HTTP/2 frames written by hand over a loopback socket, for the attacks no real client makes:
// streams opened and reset at once (rapid reset), header blocks continued without end, and
// calls whose stream window is zero. Headers are HPACK literals (no table, no Huffman).
#ifndef PAGODA_TESTS_INTEGRATION_RAW_H2_H_
#define PAGODA_TESTS_INTEGRATION_RAW_H2_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace pagoda::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A header block of `headers` as HPACK literals without indexing.
std::string HpackLiterals(const Headers& headers);
// The request headers of a gRPC call to `path` (e.g. "/pagoda.v1.Generation/Generate").
Headers GrpcRequestHeaders(const std::string& path);
// A gRPC message frame: uncompressed flag, 4-byte length, the message's bytes.
std::string GrpcMessage(std::string_view bytes);

class RawH2Connection {
 public:
  // Connects to 127.0.0.1:port and sends the client preface and SETTINGS with the given
  // initial stream window (0: the server may send no DATA until a WINDOW_UPDATE). Sends time
  // out after `send_timeout` (a server that stops reading fails them). Null when the
  // connection is refused.
  // `source`: the loopback address to connect from (another client than 127.0.0.1).
  static std::unique_ptr<RawH2Connection> Open(int port, uint32_t initial_window = 65535,
                                               absl::Duration send_timeout = absl::Seconds(5),
                                               const char* source = "127.0.0.1");
  ~RawH2Connection();

  bool SendFrame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload);
  bool SendHeaders(uint32_t stream_id, std::string_view block, bool end_stream, bool end_headers);
  bool SendContinuation(uint32_t stream_id, std::string_view block, bool end_headers);
  bool SendData(uint32_t stream_id, std::string_view data, bool end_stream);
  bool SendRstStream(uint32_t stream_id, uint32_t error_code = 8 /* CANCEL */);
  // HEADERS (end of headers) then one DATA frame with the message, ending the stream.
  bool SendGrpcCall(uint32_t stream_id, const std::string& path, std::string_view message);

  // What Pump read.
  struct Seen {
    int frames = 0, headers = 0, data = 0, rst_streams = 0, goaways = 0;
    int64_t data_bytes = 0;
    bool closed = false;  // the server closed the connection (or reset it)
  };
  // Reads frames for up to `timeout` (until the connection closes), answering SETTINGS and
  // PING as a client must. Sends no WINDOW_UPDATE.
  Seen Pump(absl::Duration timeout);
  const Seen& seen() const { return seen_; }

 private:
  explicit RawH2Connection(int fd) : fd_(fd) {}
  bool SendAll(std::string_view bytes);
  void OnFrame(uint8_t type, uint8_t flags, std::string_view payload);

  int fd_ = -1;
  std::string in_;  // bytes read, not yet a whole frame
  Seen seen_;
};

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_INTEGRATION_RAW_H2_H_
