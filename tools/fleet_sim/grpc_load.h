// M concurrent Generate streams over gRPC's callback API: each stream asks again as soon as
// its request ends (a closed loop), `streams_per_connection` of them per connection.
#ifndef PAGODA_TOOLS_FLEET_SIM_GRPC_LOAD_H_
#define PAGODA_TOOLS_FLEET_SIM_GRPC_LOAD_H_

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tools/fleet_sim/load_options.h"

namespace pagoda::fleet {

class GrpcLoad {
 public:
  GrpcLoad(LoadOptions options, LoadStats* stats);
  ~GrpcLoad();  // Stop()s

  void Start();
  // No new requests; cancels those in flight and waits for them to end.
  void Stop();

  // For GrpcStream.
  const LoadOptions& options() const { return options_; }
  LoadStats* stats() { return stats_; }
  bool stopping() {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }
  // A stream's call ended (its context is about to go); true: Relaunch it.
  bool Ended(int stream);
  // The stream's next call on the same connection, unless stopping.
  void Relaunch(int stream);

 private:
  const LoadOptions options_;
  LoadStats* const stats_;
  std::vector<std::unique_ptr<v1::Generation::Stub>> stubs_;  // one per connection
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);  // per stream, to cancel
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_GRPC_LOAD_H_
