// One call's generation, whatever its API: the request layer between a transport and the
// Cluster. It validates and submits the call's core requests, turns their updates into output
// chunks (RequestOutput) and queues them for the transport to take and write. The Cluster
// calls its sinks on worker loop threads, which must never wait, so chunks queue here; the one
// backpressure rule for every API: a call whose client is not reading is paused once
// max(kMaxUnsentTokens, kMaxUnsentTokensPerSequence x its sequences) of its tokens are unsent
// (queued, or taken and not yet Sent), and resumed once fewer than a quarter of those are. A stream
// destroyed (or aborted) before its end aborts its requests: their blocks are freed within a step.
// Thread-safe. Lock order: the Cluster's, then the stream's sink lock, then the transport's, then
// the stream's.
#ifndef PAGODA_ROUTER_API_GENERATION_STREAM_H_
#define PAGODA_ROUTER_API_GENERATION_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/api/request_output.h"
#include "router/core/cluster.h"

namespace pagoda {

class GenerationStream {
 public:
  // None owned; all outlive the stream. `metrics` may be null. `on_output`, when set, is
  // called after each chunk, end or error is queued, on the worker loop thread that delivered
  // it (outside the Cluster's lock, but under it when a request ends early): it must not block
  // and must not call the Cluster, but may Take (a callback transport such as gRPC's reactor
  // writes from there).
  GenerationStream(Cluster* cluster, const Tokenizer* tokenizer, RouterMetrics* metrics,
                   std::function<void()> on_output = nullptr);
  ~GenerationStream();  // aborts what still runs

  // The one validation point: every request passes Cluster::Validate before anything is sized
  // by it (INVALID_ARGUMENT naming the field otherwise); then each is submitted. Request i's
  // sequence j is chunk index i * n + j. A request still waiting for a worker at `give_up_at`
  // ends the stream with UNAVAILABLE (WorkerWaitEnd). On an error the requests already
  // submitted are aborted. `peer` is where the call came from (the paused caps count by it).
  // Call once.
  absl::Status Submit(std::vector<GenerationRequest> requests,
                      const std::vector<std::string>& stops, absl::Time give_up_at,
                      const RequestPeer& peer = {});

  // What a transport takes in one go: the chunks queued, in order, then whether the stream
  // ended (every sequence finished, or an error, or Abort), and the error when it failed (no
  // worker came: UNAVAILABLE; a worker dropped a sequence: INTERNAL).
  struct Taken {
    std::vector<OutputChunk> chunks;
    bool done = false;
    absl::Status error;
    int num_tokens() const;  // in `chunks`
  };
  // Waits up to `timeout` for something to take (zero: never waits).
  Taken Take(absl::Duration timeout);
  // The transport wrote `num_tokens` of the tokens it took to its client: the client reads,
  // and a paused call may run again. Call it without the transport's lock held (it may call
  // Cluster::Resume).
  void Sent(int num_tokens);

  // Whether the call's requests are paused (its client is not reading).
  bool paused() const { return paused_->load(); }
  // The error that ended the stream, if any (OK while it runs or once it ended well).
  absl::Status error() const;

  // The client went away: every sequence ends now and frees its blocks. Returns once no sink
  // can reach this stream (nor `on_output` run) any more. Call it without the transport's lock.
  void Abort();

 private:
  struct Part {
    int64_t request_id = -1;
    int index_offset = 0;
    std::unique_ptr<RequestOutput> output;
  };
  // The sink of part `part`, called under gate_->mu (taken through the sink's own copy of
  // gate_): whether its sequence goes on.
  bool OnUpdate(int part, const RequestUpdate& u);
  // REQUIRES: mu_ held. Queues `u`'s chunk, if any, or the error; whether the sequence goes on.
  bool QueueLocked(int part, const RequestUpdate& u) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Cluster* const cluster_;            // Not owned.
  const Tokenizer* const tokenizer_;  // Not owned.
  RouterMetrics* const metrics_;      // Not owned; may be null.
  const std::function<void()> on_output_;
  // Shared with the requests' sequences: set while the client is not reading.
  const std::shared_ptr<std::atomic<bool>> paused_ = std::make_shared<std::atomic<bool>>(false);

  // Held through a sink's whole call, on_output_ included: the Cluster calls sinks outside its
  // lock, so Abort waits here for a sink running and closes the stream to those that follow.
  // Shared with the sinks: a delivery already on its way when the stream is destroyed finds
  // the gate closed and never touches the stream.
  struct SinkGate {
    absl::Mutex mu;
    bool closed ABSL_GUARDED_BY(mu) = false;
  };
  const std::shared_ptr<SinkGate> gate_ = std::make_shared<SinkGate>();

  mutable absl::Mutex mu_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<OutputChunk> queue_ ABSL_GUARDED_BY(mu_);
  int unsent_tokens_ ABSL_GUARDED_BY(mu_) = 0;  // queued, or taken and not yet Sent
  int max_unsent_tokens_ ABSL_GUARDED_BY(mu_) = kMaxUnsentTokens;  // paused from there
  int num_unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_GENERATION_STREAM_H_
