// Every bound gRPC 1.51 offers for a listening port, set on its ServerBuilder: a resource
// quota (threads of the sync API, buffer memory), concurrent streams per connection, the
// size of a call's metadata, keepalive enforcement and connection lifetimes; and whether the
// port serves reflection. What 1.51 cannot
// bound (HTTP/2 rapid reset, CVE-2023-44487: streams opened and reset at once) is for a proxy
// in front of the public port (deploy/README.md).
#ifndef PAGODA_ROUTER_LINK_GRPC_PORT_LIMITS_H_
#define PAGODA_ROUTER_LINK_GRPC_PORT_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace pagoda {

struct GrpcPortLimits {
  std::string name;                      // the resource quota's, for gRPC's logs
  int max_streams_per_connection = 256;  // SETTINGS_MAX_CONCURRENT_STREAMS
  int max_threads = 64;                  // sync-API handler threads; beyond: RESOURCE_EXHAUSTED
  int64_t max_memory_bytes = int64_t{512} << 20;  // gRPC's buffers for the port
  int max_metadata_bytes = 16 << 10;  // a call's headers (SETTINGS_MAX_HEADER_LIST_SIZE)
  int max_receive_message_bytes = 4 << 20;
  // A client may ping this often without data; two strikes more and it gets GOAWAY.
  absl::Duration min_ping_interval = absl::Seconds(10);
  absl::Duration keepalive_time = absl::Seconds(60);      // the server pings idle connections ...
  absl::Duration keepalive_timeout = absl::Seconds(20);   // ... and drops those that do not answer
  absl::Duration max_connection_idle = absl::Minutes(5);  // no call this long: GOAWAY
  absl::Duration max_connection_age = absl::Hours(1);     // then GOAWAY; calls get the grace
  absl::Duration max_connection_age_grace = absl::Minutes(10);
};

void ApplyGrpcPortLimits(const GrpcPortLimits& limits, grpc::ServerBuilder* builder);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_GRPC_PORT_LIMITS_H_
