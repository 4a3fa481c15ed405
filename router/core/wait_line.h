// What the router is waiting for, as a log line every `every` while it waits (issue 41: long
// waits say what they wait for): for a worker while it cannot serve (which ones are loading
// and how far, or that none has dialled the worker port), for draining workers to finish
// their sequences, and at shutdown for the streams in flight. Quiet while nothing is awaited.
//
//   not serving yet (20 s): waiting for a worker; loading: h:12 loading weights: 1.2 / 2.2 GB
//     (54%), 850 MB/s, 1 s left
//   draining (12 s): worker 3 has 5 sequences left
//
// Thread-compatible: one thread calls Next (the router's tick).
#ifndef PAGODA_ROUTER_CORE_WAIT_LINE_H_
#define PAGODA_ROUTER_CORE_WAIT_LINE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace pagoda {

class WaitLine {
 public:
  // What the router sees at a tick.
  struct State {
    bool serving = false;
    bool shutting_down = false;
    bool proxy_down = false;  // the HAProxy in front of the public port is being restarted
    int num_workers = 0;      // connected, draining ones included
    int num_running = 0;      // sequences running on the workers
    int num_spawned = 0;      // local workers it started (--spawn-workers)
    int worker_port = 0;      // where workers dial, for the hint
    std::vector<std::string> loading = {};  // LoadingBoard::Loading
    // (worker id, sequences still there) of each draining worker.
    std::vector<std::pair<int, int>> draining = {};
  };

  explicit WaitLine(absl::Duration every = absl::Seconds(10)) : every_(every) {}

  // The line to log now, or nullopt: nothing is awaited, or the last line (or the wait's
  // start) was under `every` ago.
  std::optional<std::string> Next(const State& state, absl::Time now);

 private:
  std::string Describe(const State& state, absl::Time now) const;

  const absl::Duration every_;
  std::optional<absl::Time> waiting_since_;  // for a worker to serve with
  std::optional<absl::Time> shutdown_since_;
  absl::flat_hash_map<int, absl::Time> draining_since_;  // by worker id
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_WAIT_LINE_H_
