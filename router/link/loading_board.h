// What the workers still loading their model last said (WorkerLink.Loading, issue 41): each
// report is checked, logged at most every few seconds per worker, and kept until the worker
// connects or goes quiet, so the router's wait line (WaitLine) can say what it waits for.
// Reports are untrusted text from the worker port: names and descriptions are printable ASCII
// of bounded length, byte counts in range, and the board holds at most kMaxWorkers entries.
//
// Thread-safe.
#ifndef PAGODA_ROUTER_LINK_LOADING_BOARD_H_
#define PAGODA_ROUTER_LINK_LOADING_BOARD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pagoda {

// A worker's report (WorkerLink.Loading's LoadingReport, as the transport read it).
struct LoadReport {
  std::string worker_name;  // as its Hello will say
  std::string what;         // "loading weights"
  int64_t done_bytes = 0;
  int64_t total_bytes = 0;  // 0: unknown
  int64_t elapsed_ms = 0;   // of this stage of the load
};

class LoadingBoard {
 public:
  static constexpr int kMaxWorkers = 1024;
  static constexpr size_t kMaxNameBytes = 128, kMaxWhatBytes = 64;
  // A report older than this is forgotten (the worker died, or connected elsewhere).
  static constexpr absl::Duration kFresh = absl::Seconds(30);

  explicit LoadingBoard(absl::Duration log_every = absl::Seconds(5)) : log_every_(log_every) {}

  // Records a report from `peer`. INVALID_ARGUMENT naming the field when it is out of range.
  // The line to log ("worker h:12 (ipv4:10.0.0.5:4711) loading weights: 1.2 / 2.2 GB (54%),
  // 850 MB/s, 1 s left"), or nullopt when this worker's last one was logged under log_every ago.
  absl::StatusOr<std::optional<std::string>> Report(const LoadReport& report,
                                                    const std::string& peer, absl::Time now);
  // The worker connected: its loading is over.
  void Connected(const std::string& name);
  // "h:12 loading weights: 1.2 / 2.2 GB (54%), ..." for each worker that reported within
  // kFresh of `now`, by name.
  std::vector<std::string> Loading(absl::Time now) const;

 private:
  struct Entry {
    std::string line;  // what it is doing and how far
    absl::Time at;     // of the last report
    absl::Time logged = absl::InfinitePast();
  };
  const absl::Duration log_every_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by worker name
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_LOADING_BOARD_H_
