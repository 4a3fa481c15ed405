// While a worker loads its model, before it can connect, it tells its router how far it is
// every few seconds (WorkerLink.Loading, issue 41), so the router's log shows each worker's
// load and its wait line says what it waits for. Best effort: a router that is not up yet, or
// refuses, costs one failed call per interval and nothing else; loading never waits on it.
//
// Thread-safe: Progress from the loading thread, the calls from the reporter's own.
#ifndef PAGODA_WORKER_LOAD_REPORT_CLIENT_H_
#define PAGODA_WORKER_LOAD_REPORT_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/worker_service.h"

namespace pagoda {

class LoadReportClient {
 public:
  // Reports to link.router_address as link.name, with its token and TLS, every `every` from
  // now until destroyed (the first after `every`: a quick load says nothing).
  explicit LoadReportClient(const WorkerServiceOptions& link,
                            absl::Duration every = absl::Seconds(5));
  ~LoadReportClient();  // stops; waits for a call in flight (at most its 2 s deadline)

  // What the load does now ("hashing weights", "loading weights": a string literal) and how far.
  void Progress(const char* what, int64_t done, int64_t total);

 private:
  void Run();

  const WorkerServiceOptions link_;
  const absl::Duration every_;
  // What the load does now and since when (each stage's rate and time left are its own).
  std::atomic<const char*> what_{"starting"};
  std::atomic<int64_t> stage_start_ns_;
  std::atomic<int64_t> done_{0}, total_{0};
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above are set
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LOAD_REPORT_CLIENT_H_
