#include "router/core/wait_line.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagoda {
namespace {

int64_t Seconds(absl::Duration d) { return absl::ToInt64Seconds(d); }

}  // namespace

std::optional<std::string> WaitLine::Next(const State& state, absl::Time now) {
  // The waits in progress, each from when it was first seen.
  const bool waiting = !state.serving && !state.shutting_down;
  if (!waiting) waiting_since_.reset();
  if (waiting && !waiting_since_) waiting_since_ = now;
  if (!state.shutting_down) shutdown_since_.reset();
  if (state.shutting_down && !shutdown_since_) shutdown_since_ = now;
  absl::flat_hash_map<int, absl::Time> draining;
  for (const auto& [id, running] : state.draining) {
    auto it = draining_since_.find(id);
    draining[id] = it == draining_since_.end() ? now : it->second;
  }
  draining_since_ = std::move(draining);

  std::optional<absl::Time> since;  // the oldest wait
  for (const std::optional<absl::Time>& t : {waiting_since_, shutdown_since_}) {
    if (t && (!since || *t < *since)) since = t;
  }
  for (const auto& [id, t] : draining_since_) {
    if (!since || t < *since) since = t;
  }
  if (!since || now - *since < every_ || now - last_ < every_) return std::nullopt;
  last_ = now;
  return Describe(state, now);
}

std::string WaitLine::Describe(const State& state, absl::Time now) const {
  std::vector<std::string> parts;
  if (shutdown_since_) {
    parts.push_back(absl::StrCat("shutting down (", Seconds(now - *shutdown_since_),
                                 " s): waiting for ", state.num_running,
                                 " running sequences to finish"));
  } else if (waiting_since_) {
    std::string part = absl::StrCat("not serving yet (", Seconds(now - *waiting_since_), " s): ");
    if (state.proxy_down) {
      absl::StrAppend(&part, "waiting for the HTTP/2 flood guard (HAProxy) to start again");
    } else if (state.num_workers > 0) {
      absl::StrAppend(&part, "every connected worker is draining");
    } else if (!state.loading.empty()) {
      absl::StrAppend(&part, "waiting for a worker; loading: ", absl::StrJoin(state.loading, "; "));
    } else if (state.num_spawned > 0) {
      absl::StrAppend(&part, "waiting for ", state.num_spawned,
                      " spawned worker(s) to load the model and connect");
    } else {
      absl::StrAppend(&part, "no worker has connected to the worker port ", state.worker_port,
                      " (start one: pagoda-worker --router=THIS_HOST:", state.worker_port,
                      " --model=...)");
    }
    parts.push_back(std::move(part));
  }
  if (!state.draining.empty()) {
    std::vector<std::string> workers;
    int64_t longest = 0;
    for (const auto& [id, running] : state.draining) {
      workers.push_back(absl::StrCat("worker ", id, " has ", running, " sequences left"));
      if (auto it = draining_since_.find(id); it != draining_since_.end()) {
        longest = std::max(longest, Seconds(now - it->second));
      }
    }
    parts.push_back(absl::StrCat("draining (", longest, " s): ", absl::StrJoin(workers, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace pagoda
