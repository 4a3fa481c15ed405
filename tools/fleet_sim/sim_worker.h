// One simulated worker (SimWorkers hosts them): a WorkerLink.Connect call driven by gRPC's
// callback API. Commands arrive in OnReadDone; the result is built at once and sent by the
// owner's timer thread (Fire) when the modelled step time has passed. Writes are queued, one
// in flight at a time, as the callback API requires.
#ifndef PAGODA_TOOLS_FLEET_SIM_SIM_WORKER_H_
#define PAGODA_TOOLS_FLEET_SIM_SIM_WORKER_H_

#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/worker.grpc.pb.h"

namespace pagoda::fleet {

class SimWorkers;

class SimWorker final : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::RouterMessage> {
 public:
  SimWorker(SimWorkers* owner, int index);

  void Start();
  // The owner's timer: sends the result that is due, or a heartbeat if nothing was sent for a
  // second. Returns when to be called next (InfiniteFuture: never, the call is over).
  absl::Time Fire(absl::Time now);
  void Cancel() { context_.TryCancel(); }
  void WaitDone();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void SendLocked(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleStep(const v1::StepCommand& step);

  SimWorkers* const owner_;
  const int index_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerLink::Stub> stub_;
  grpc::ClientContext context_;
  v1::RouterMessage in_;  // the read in flight (only the reactor touches it)
  std::mt19937 rng_;

  absl::Mutex mu_;
  std::deque<v1::WorkerMessage> out_ ABSL_GUARDED_BY(mu_);  // front: the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_removed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<v1::WorkerMessage> result_ ABSL_GUARDED_BY(mu_);  // waiting for its time
  absl::Time result_due_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_);
  // For the added step latency: when the last result went out, and whether it left work.
  absl::Time result_sent_ ABSL_GUARDED_BY(mu_);
  bool had_work_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<float> added_ms_ ABSL_GUARDED_BY(mu_);
  std::vector<float> step_ms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_SIM_WORKER_H_
