// One HTTP call's generation, between the Cluster (which calls sinks on worker loop threads and
// must never wait) and the HTTP thread that writes the response (which may wait on a slow
// client). It submits one core request per prompt and queues their output chunks for the HTTP
// thread to take. As on gRPC, a call whose client is not reading pauses once
// kMaxUnsentTokens of its tokens wait, and an abandoned call is aborted (its blocks freed
// within a step). Thread-safe.
#ifndef PAGODA_ROUTER_API_HTTP_GENERATION_H_
#define PAGODA_ROUTER_API_HTTP_GENERATION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/api/request_output.h"
#include "router/cluster.h"

namespace pagoda {

class HttpGeneration {
 public:
  // None owned; all outlive this. `metrics` may be null.
  HttpGeneration(Cluster* cluster, const Tokenizer* tokenizer, RouterMetrics* metrics);
  ~HttpGeneration();  // aborts what still runs

  // Submits every request (each already passed Cluster::Validate); their chunks' indices are
  // numbered request by request: request i's sequence j is choice i * n + j. On an error the
  // requests already submitted are aborted.
  absl::Status Submit(std::vector<GenerationRequest> requests,
                      const std::vector<std::string>& stops, absl::Time give_up_at);

  // What the HTTP thread takes in one go: chunks in arrival order, then whether everything
  // ended, and an error when the generation failed (no worker came, or a worker dropped it).
  struct Taken {
    std::vector<OutputChunk> chunks;
    bool done = false;
    absl::Status error;
  };
  // Waits until there is something to take, or `timeout`.
  Taken Take(absl::Duration timeout);

  // The client went away: every sequence ends now and frees its blocks.
  void Abort();

 private:
  struct Part {
    int64_t request_id = -1;
    int index_offset = 0;
    std::unique_ptr<RequestOutput> output;
  };
  bool OnUpdate(int part, const RequestUpdate& u);

  Cluster* const cluster_;
  const Tokenizer* const tokenizer_;
  RouterMetrics* const metrics_;
  const std::shared_ptr<std::atomic<bool>> paused_ = std::make_shared<std::atomic<bool>>(false);

  absl::Mutex mu_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<OutputChunk> queue_ ABSL_GUARDED_BY(mu_);
  int unsent_tokens_ ABSL_GUARDED_BY(mu_) = 0;  // in queue_
  int num_unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_HTTP_GENERATION_H_
