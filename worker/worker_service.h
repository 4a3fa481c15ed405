// The worker's side of the WorkerLink stream: dials the router, introduces itself (Hello),
// then executes every StepCommand it receives and answers with a StepResult. Sends a heartbeat
// every second from a second thread. When the stream breaks (router restart, network), it
// starts over with an empty engine after a backoff: the router treats it as a new worker.
// (Graceful drain on SIGTERM is the deployment issue's; today the process just ends.)
#ifndef PAGODA_WORKER_WORKER_SERVICE_H_
#define PAGODA_WORKER_WORKER_SERVICE_H_

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

  // Serves until the router refuses this worker (a different model); then returns 1.
  int Run();

 private:
  // One connection, from dial to break. Returns false when the router refused this worker.
  bool ServeOneConnection();

  std::unique_ptr<WorkerEngine> engine_;
  const WorkerServiceOptions options_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_SERVICE_H_
