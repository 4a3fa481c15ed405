#include "router/link/grpc_port_limits.h"

#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"

namespace pagoda {
namespace {

int Millis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

}  // namespace

void ApplyGrpcPortLimits(const GrpcPortLimits& limits, grpc::ServerBuilder* builder) {
  grpc::ResourceQuota quota(limits.name);
  quota.Resize(static_cast<size_t>(limits.max_memory_bytes));
  quota.SetMaxThreads(limits.max_threads);
  builder->SetResourceQuota(quota);
  builder->SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_streams_per_connection);
  builder->AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, limits.max_metadata_bytes);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              Millis(limits.min_ping_interval));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(limits.keepalive_time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(limits.keepalive_timeout));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Millis(limits.max_connection_idle));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Millis(limits.max_connection_age));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                              Millis(limits.max_connection_age_grace));
}

}  // namespace pagoda
