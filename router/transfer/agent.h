// The Engine's side of KV transfers between workers (issue 28; vLLM's KV connector, worker
// side): blocks it holds for a peer to pull, requests that pull blocks from a peer before they
// run, and the events its Cluster hears of both. The worker runs the pulls beside its steps
// (StepCommand.pulls); the TransferPlanner decides who pulls what from whom. Engine::Step()
// calls it at two named points:
//
//   BeforeSchedule() → Schedule() → Execute() → CheckResult() → Postprocess() → AfterPostprocess()
//    holds answered,                            pulls reported     pulled requests queued
//    pulls started                              checked
//
// Thread-compatible: the engine's thread only.
#ifndef PAGODA_ROUTER_TRANSFER_AGENT_H_
#define PAGODA_ROUTER_TRANSFER_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/step.h"
#include "router/core/scheduler.h"
#include "router/core/sequence.h"
#include "router/transfer/orders.h"

namespace pagoda {

struct GenerationRequest;  // router/core/engine.h, which includes this header

class TransferAgent {
 public:
  // Queues a request whose pull ended (with the partial block it brought, if any) as the
  // engine's sequences; an error when it no longer can (the tail is then released here).
  using Arrive = std::function<absl::Status(int64_t request_id, const GenerationRequest& request,
                                            std::optional<PulledTail> tail)>;
  // `scheduler` is not owned and must outlive the agent.
  TransferAgent(Scheduler* scheduler, Arrive arrive);

  // Holds the leading cached blocks of `order.tokens` for a peer until Release, answered in
  // TakeEvents().held at a later step: once all are cached, or no sequence here is about to
  // compute the next one (so a prefix being computed is computed once).
  void Hold(HoldOrder order);
  // Answers the hold orders that are ready (BeforeSchedule does too, first).
  void ServeHolds();
  void Release(std::span<const int> blocks);  // blocks a Hold or a detached sequence held
  void CountHeld(int64_t num_blocks);         // a detached sequence's, held until Release
  int64_t num_held_blocks() const { return num_held_blocks_; }

  // A request that first pulls `plan`, then runs from those blocks (or computes them when the
  // pull fails). REQUIRES: the engine can take it (Engine::AddPulledRequest checked).
  void AddPull(int64_t request_id, const GenerationRequest& request, PullPlan plan);
  // The request's pulls (with seq_index >= 0, the one carrying that sequence) end unqueued.
  void Abort(int64_t request_id, int seq_index = -1);

  // Pulls to wait for, or holds waiting for a computation: work for Step().
  bool has_work() const { return !pulls_.empty() || !holds_.empty(); }
  bool has_pulls() const { return !pulls_.empty(); }
  bool has_pulls_in_flight() const;

  // Step()'s first point: answers the ready holds and returns the pulls to send with this
  // step; a pull that needs nothing or cannot start ends here.
  std::vector<BlockPull> BeforeSchedule();
  // INTERNAL when the worker reports a pull it was not asked for, twice, or out of range.
  absl::Status CheckResult(const StepResult& result) const;
  // Step()'s second point: caches what the reported pulls brought and queues their requests.
  void AfterPostprocess(const StepResult& result);
  // What happened to the transfers since the last call.
  TransferEvents TakeEvents();

 private:
  struct Pull {
    PullPlan plan;
    int64_t request_id = 0;
    std::shared_ptr<const GenerationRequest> request;  // never null
    bool started = false;
    bool aborted = false;
    int num_local = 0;     // leading full blocks already cached here (not pulled)
    std::vector<int> dst;  // held: the full blocks from num_local on, then the tail's
    absl::Time start;
  };
  // Caches what a pull brought (when ok), then queues its request.
  void EndPull(int64_t transfer_id, bool ok, const std::string& error, int64_t bytes,
               double seconds);

  Scheduler* const scheduler_;  // Not owned.
  const Arrive arrive_;
  std::vector<HoldOrder> holds_;              // waiting for their blocks to be computed
  absl::flat_hash_map<int64_t, Pull> pulls_;  // by transfer id
  int64_t num_held_blocks_ = 0;               // by Hold and detached sequences, not released
  TransferEvents events_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_TRANSFER_AGENT_H_
