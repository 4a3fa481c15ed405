// The Cluster's members by id: each worker's loop and whether it is alive and draining, and
// what the Cluster reads across all of them (room for a newcomer, the waiting count, the
// planner's snapshot, the stats). A loop stays after its worker dies (its cumulative step
// counters still count); Reap joins its thread once it has exited.
// Not thread-safe: the Cluster calls it under its place_mu_.
#ifndef PAGODA_ROUTER_CORE_WORKER_SET_H_
#define PAGODA_ROUTER_CORE_WORKER_SET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "router/core/cluster_reports.h"
#include "router/core/lora_catalog.h"
#include "router/core/worker_loop.h"
#include "router/transfer/planner.h"

namespace pagoda {

class WorkerSet {
 public:
  struct Worker {
    std::unique_ptr<WorkerLoop> loop;
    bool alive = true;
    bool draining = false;  // shutting down: gets no new request
    bool joined = false;
  };

  // The id the next Add gives: ids are dense and never reused.
  int next_id() const { return static_cast<int>(workers_.size()); }
  bool contains(int id) const { return id >= 0 && id < next_id(); }
  Worker& operator[](int id) { return *workers_[id]; }
  const Worker& operator[](int id) const { return *workers_[id]; }
  // REQUIRES: loop->id() == next_id().
  void Add(std::unique_ptr<WorkerLoop> loop);

  // Joins the threads of dead workers whose loops have exited.
  void Reap();
  int NumLive() const;
  int64_t NumLiveBlocks() const;
  // Whether a live worker takes new requests (is not draining).
  bool AnyAccepting() const;
  // Requests waiting in the live workers' schedulers and inboxes.
  int NumWaiting() const;
  std::vector<LoraCatalog::Worker> Live() const;
  std::vector<WorkerLoop*> Loops() const;  // every worker's, dead ones too

  // The planner's view of every worker now (dead ones stay, by id).
  TransferSnapshot Snapshot(const LoraCatalog* loras) const;
  std::vector<WorkerStats> Stats() const;  // live workers
  // Adds the workers' counts to `s`: cumulative step counters of every worker (deltas between
  // two calls never drop when one leaves), the rest of the live ones.
  void AddTo(ClusterStats* s) const;

 private:
  std::vector<std::unique_ptr<Worker>> workers_;  // by id
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_WORKER_SET_H_
