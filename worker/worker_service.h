// The worker's side of the WorkerLink stream: dials the router, introduces itself (Hello),
// then executes every StepCommand it receives and answers with a StepResult. Sends a heartbeat
// every second from a second thread. When the stream breaks (router restart, network), it
// starts over with an empty engine after a backoff: the router treats it as a new worker.
#ifndef PAGODA_WORKER_WORKER_SERVICE_H_
#define PAGODA_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>

#include "worker/worker_engine.h"

namespace pagoda {

struct WorkerServiceOptions {
  std::string router_address;  // host:port of the router's worker port
  std::string name;            // for the router's logs
};

class WorkerService {
 public:
  WorkerService(std::unique_ptr<WorkerEngine> engine, const WorkerServiceOptions& options);

  // Serves until Stop() or a refusal by the router (a different model). Returns the exit code.
  int Run();
  // Thread-safe; Run() returns soon after.
  void Stop() { stopping_ = true; }

 private:
  // One connection, from dial to break. Returns false when the router refused this worker.
  bool ServeOneConnection();

  std::unique_ptr<WorkerEngine> engine_;
  const WorkerServiceOptions options_;
  std::atomic<bool> stopping_{false};
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_SERVICE_H_
