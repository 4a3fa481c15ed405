// The worker's side of the WorkerLink stream: dials the router, introduces itself (Hello),
// then executes every StepCommand it receives and answers with a StepResult. Sends a heartbeat
// every second from a second thread. When the stream breaks (router restart, network), it
// starts over with an empty engine after a backoff: the router treats it as a new worker.
//
// Drain() (SIGTERM) asks the router for no new work; Run() returns once the router reports the
// worker empty, or after `drain_timeout`, when the router moves what is left to other workers.
#ifndef PAGODA_WORKER_WORKER_SERVICE_H_
#define PAGODA_WORKER_WORKER_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/process/secret.h"
#include "pagoda/v1/worker.pb.h"
#include "worker/worker_engine.h"

namespace pagoda {

struct WorkerServiceOptions {
  std::string router_address;  // host:port of the router's worker port
  std::string name;            // for the router's logs
  std::string worker_token;    // sent as authorization: Bearer <token>; "" = none
  // TLS to the router when `tls` (roots: tls_pem.ca, else the system's), presenting
  // tls_pem.cert / key as a client certificate when given (mTLS).
  bool tls = false;
  TlsPem tls_pem;
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(25)};
  // Called with true once the router accepted this worker, false when that ends (lost link,
  // draining). For a readiness probe.
  std::function<void(bool ready)> on_ready;
  // A pipeline stage's (issue 40): the router wired its group; where its activations go.
  std::function<void(const std::string& next_stage_address)> on_stage_wiring;
};

class WorkerService {
 public:
  WorkerService(std::unique_ptr<WorkerEngine> engine, const WorkerServiceOptions& options);

  // Serves until drained (returns 0) or refused by the router, which serves another model or
  // wants another token (returns 1).
  int Run();

  // Starts a drain; thread-safe, returns at once.
  void Drain();

 private:
  enum class Outcome { kReconnect, kRefused, kDone };
  // One connection, from dial to break.
  Outcome ServeOneConnection();
  void SetReady(bool ready);
  // Runs a LoadAdapter or UnloadAdapter between steps and fills its answer.
  void AnswerAdapter(const v1::RouterMessage& message, v1::AdapterLoaded* out);

  std::unique_ptr<WorkerEngine> engine_;
  const WorkerServiceOptions options_;
  // When "waiting for the router" was last logged (Run's thread only).
  std::chrono::steady_clock::time_point unreachable_logged_{};

  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_SERVICE_H_
