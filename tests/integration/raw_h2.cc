#include "tests/integration/raw_h2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace pagoda::testing {
namespace {

constexpr uint8_t kData = 0, kHeaders = 1, kRstStream = 3, kSettings = 4, kPing = 6, kGoaway = 7,
                  kContinuation = 9;
constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

// An HPACK integer with an N-bit prefix (RFC 7541 §5.1), first byte's high bits `high`.
void AppendInt(uint32_t value, int prefix_bits, uint8_t high, std::string* out) {
  const uint32_t max = (1u << prefix_bits) - 1;
  if (value < max) {
    out->push_back(static_cast<char>(high | value));
    return;
  }
  out->push_back(static_cast<char>(high | max));
  value -= max;
  while (value >= 128) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendString(std::string_view s, std::string* out) {
  AppendInt(static_cast<uint32_t>(s.size()), 7, 0, out);  // no Huffman
  out->append(s);
}

void AppendU32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

}  // namespace

std::string HpackLiterals(const Headers& headers) {
  std::string block;
  for (const auto& [name, value] : headers) {
    block.push_back(0);  // literal without indexing, new name
    AppendString(name, &block);
    AppendString(value, &block);
  }
  return block;
}

Headers GrpcRequestHeaders(const std::string& path) {
  return {{":method", "POST"},
          {":scheme", "http"},
          {":path", path},
          {":authority", "localhost"},
          {"content-type", "application/grpc"},
          {"te", "trailers"}};
}

std::string GrpcMessage(std::string_view bytes) {
  std::string out(1, '\0');
  AppendU32(static_cast<uint32_t>(bytes.size()), &out);
  out.append(bytes);
  return out;
}

std::unique_ptr<RawH2Connection> RawH2Connection::Open(int port, uint32_t initial_window,
                                                       absl::Duration send_timeout,
                                                       const char* source) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return nullptr;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
    close(fd);
    return nullptr;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return nullptr;
  }
  const timeval tv = absl::ToTimeval(send_timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<RawH2Connection> c(new RawH2Connection(fd));
  std::string settings;
  settings.append({0, 4});  // SETTINGS_INITIAL_WINDOW_SIZE
  AppendU32(initial_window, &settings);
  if (!c->SendAll("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") || !c->SendFrame(kSettings, 0, 0, settings)) {
    return nullptr;
  }
  return c;
}

RawH2Connection::~RawH2Connection() {
  if (fd_ >= 0) close(fd_);
}

bool RawH2Connection::SendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawH2Connection::SendFrame(uint8_t type, uint8_t flags, uint32_t stream_id,
                                std::string_view payload) {
  std::string frame;
  frame.reserve(9 + payload.size());
  AppendU32(static_cast<uint32_t>(payload.size()), &frame);
  frame.erase(0, 1);  // 24-bit length
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  AppendU32(stream_id & 0x7fffffff, &frame);
  frame.append(payload);
  return SendAll(frame);
}

bool RawH2Connection::SendHeaders(uint32_t stream_id, std::string_view block, bool end_stream,
                                  bool end_headers) {
  return SendFrame(kHeaders, (end_stream ? kEndStream : 0) | (end_headers ? kEndHeaders : 0),
                   stream_id, block);
}

bool RawH2Connection::SendContinuation(uint32_t stream_id, std::string_view block,
                                       bool end_headers) {
  return SendFrame(kContinuation, end_headers ? kEndHeaders : 0, stream_id, block);
}

bool RawH2Connection::SendData(uint32_t stream_id, std::string_view data, bool end_stream) {
  return SendFrame(kData, end_stream ? kEndStream : 0, stream_id, data);
}

bool RawH2Connection::SendRstStream(uint32_t stream_id, uint32_t error_code) {
  std::string payload;
  AppendU32(error_code, &payload);
  return SendFrame(kRstStream, 0, stream_id, payload);
}

bool RawH2Connection::SendGrpcCall(uint32_t stream_id, const std::string& path,
                                   std::string_view message) {
  return SendHeaders(stream_id, HpackLiterals(GrpcRequestHeaders(path)), false, true) &&
         SendData(stream_id, GrpcMessage(message), true);
}

RawH2Connection::Seen RawH2Connection::Pump(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  char buf[65536];
  while (!seen_.closed) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      seen_.closed = true;
      break;
    }
    in_.append(buf, static_cast<size_t>(n));
    while (in_.size() >= 9) {
      const auto byte = [&](size_t i) { return static_cast<uint8_t>(in_[i]); };
      const size_t length = (size_t{byte(0)} << 16) | (size_t{byte(1)} << 8) | byte(2);
      if (in_.size() < 9 + length) break;
      OnFrame(byte(3), byte(4), std::string_view(in_).substr(9, length));
      in_.erase(0, 9 + length);
    }
  }
  return seen_;
}

void RawH2Connection::OnFrame(uint8_t type, uint8_t flags, std::string_view payload) {
  ++seen_.frames;
  switch (type) {
    case kSettings:
      if (!(flags & kAck)) SendFrame(kSettings, kAck, 0, "");
      break;
    case kPing:
      if (!(flags & kAck)) SendFrame(kPing, kAck, 0, payload);
      break;
    case kHeaders:
      ++seen_.headers;
      break;
    case kData:
      ++seen_.data;
      seen_.data_bytes += static_cast<int64_t>(payload.size());
      break;
    case kRstStream:
      ++seen_.rst_streams;
      break;
    case kGoaway:
      ++seen_.goaways;
      break;
    default:
      break;
  }
}

}  // namespace pagoda::testing
