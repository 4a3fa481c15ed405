// One connected worker as the Cluster sees it: the Executor over the worker's WorkerLink call.
// Execute queues a StepCommand and waits for the StepResult that the call's reader hands over
// (OnResult); ChangeAdapter does the same for an adapter change. Everything the router sends
// the worker (the Hello's reply, steps, adapter changes, stage wiring, Drained) goes through one
// queue, written one message at a time by the call's reactor (gRPC's callback API allows one
// write in flight): no thread waits for a write, and no thread reads for the worker, so a step
// costs the router one thread hand-off (the reader's callback waking the worker's loop).
// Thread-safe: the worker's loop thread, the call's callbacks and the Cluster call in.
#ifndef PAGODA_ROUTER_LINK_WORKER_CONNECTION_H_
#define PAGODA_ROUTER_LINK_WORKER_CONNECTION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "pagoda/v1/worker.pb.h"

namespace pagoda {

class WorkerConnection final : public Executor {
 public:
  // What the connection needs of its call: start writing one message (the call's StartWrite;
  // its OnWriteDone must come back as OnWriteDone here), and end the call (TryCancel). Both are
  // called under the connection's lock and never after Close().
  struct Call {
    std::function<void(const v1::RouterMessage*)> start_write;
    std::function<void()> cancel;
  };
  WorkerConnection(const WorkerInfo& info, std::vector<CachedBlock> cached, Call call,
                   absl::Duration step_timeout);

  // Executor.
  const WorkerInfo& info() const override { return info_; }
  std::vector<CachedBlock> TakeCachedBlocks() override;
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override;
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override;
  // The Cluster dropped this worker (a step failed here, or its result did not check out): end
  // its call too, so the worker sees it and reconnects with a clean state.
  void Abandon() override;

  // The Hello's reply: written before anything else, and steps may be written from now on.
  void Accept(v1::RouterMessage reply);
  // Tells a pipeline stage where its activations go (StageGroups).
  void SendStageWiring(const std::string& next_stage);
  // Tells a draining worker it holds nothing more.
  void SendDrained();

  // From the call's reactor.
  void OnWriteDone(bool ok);
  void OnResult(v1::StepResult result);  // moved in: a step's result is read once
  void OnAdapterLoaded(const v1::AdapterLoaded& answer);
  // The call is over: nothing more is written or cancelled, and waiters see it closed.
  void Close();

 private:
  void QueueLocked(v1::RouterMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // unless one is in flight
  absl::Status CloseLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClosedOrReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || ready_; }
  bool ClosedOrAnswered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || result_.has_value();
  }

  const WorkerInfo info_;
  const Call call_;
  const absl::Duration step_timeout_;

  absl::Mutex mu_;
  std::vector<CachedBlock> cached_ ABSL_GUARDED_BY(mu_);  // from the Hello, until taken
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;  // the Hello's reply is queued
  std::deque<v1::RouterMessage> outbox_ ABSL_GUARDED_BY(mu_);
  // The message being written: gRPC reads it until OnWriteDone.
  std::optional<v1::RouterMessage> writing_ ABSL_GUARDED_BY(mu_);
  int64_t waiting_for_ ABSL_GUARDED_BY(mu_) = -1;
  std::optional<v1::StepResult> result_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::AdapterLoaded> adapter_answer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_WORKER_CONNECTION_H_
