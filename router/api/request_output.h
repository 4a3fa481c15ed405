// What a client sees of one request, whatever its API: the Cluster's token updates turned into
// chunks of text per sequence (stop strings cut, characters whole), with the client-side
// metrics (tokens, TTFT, inter-token latency, finish reasons) counted once for both the gRPC
// and the HTTP front end.
// Not thread-safe: its GenerationStream's lock guards it.
#ifndef PAGODA_ROUTER_API_REQUEST_OUTPUT_H_
#define PAGODA_ROUTER_API_REQUEST_OUTPUT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/step.h"
#include "router/api/text_assembler.h"
#include "router/core/cluster.h"
#include "router/core/router_metrics.h"
#include "router/core/sequence.h"

namespace pagoda {

// Stop strings per request at most, and their length: both front ends hold them per sequence.
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;

// A call whose client is not reading stops being scheduled once this many of its tokens wait
// to be sent, or kMaxUnsentTokensPerSequence per sequence when that is more, and runs again
// when fewer than a quarter do (GenerationStream): the router's memory per stream is bounded,
// and the steps go to clients that read. Per sequence, it is more than a step gives (1 + the
// drafts kept): a call of 64 prompts x n = 16 got 256 tokens from one step and was paused,
// then cancelled by the paused caps, though its client read as fast as it could.
inline constexpr int kMaxUnsentTokens = 256;
inline constexpr int kMaxUnsentTokensPerSequence = 16;

// New output of one sequence since its previous chunk.
struct OutputChunk {
  int index = 0;
  std::vector<int> token_ids;
  std::string text;                   // whole UTF-8 characters; stop strings and tokens removed
  std::vector<SampledToken> samples;  // one per token when logprobs were asked, else empty
  // The prompt's log probabilities, on the sequence's first chunk when they were asked.
  std::shared_ptr<const PromptLogprobs> prompt_logprobs;
  std::vector<float> embedding;  // an embedding request's vector, on its one (last) chunk
  bool finished = false;
  // When finished: why (kStop, kLength or kAbort; named only by the transports), and the
  // sequence's usage.
  FinishReason finish_reason = FinishReason::kNone;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

class RequestOutput {
 public:
  // `metrics` may be null. `stops`: non-empty strings.
  RequestOutput(const Tokenizer* tokenizer, std::vector<int> prompt_ids, int n,
                const std::vector<std::string>& stops, RouterMetrics* metrics);

  // The Cluster took the request: counts its prompt tokens.
  void Submitted();
  // The chunk `update` makes (nothing to send: no tokens and not finished), and whether the
  // sequence goes on (the sink's answer). REQUIRES: update.error is OK.
  struct Result {
    bool has_chunk = false;
    OutputChunk chunk;
    bool go_on = true;
  };
  Result Add(const RequestUpdate& update);

  // The submitted request ended for the client (call once): counts its unfinished sequences as
  // aborted, or, when all finished, observes its end-to-end latency.
  void End();

 private:
  using Clock = std::chrono::steady_clock;
  void ObserveToken(int seq_index);

  RouterMetrics* const metrics_;  // may be null
  const Clock::time_point arrived_at_ = Clock::now();
  const std::vector<int> prompt_ids_;
  std::vector<TextAssembler> texts_;              // (n)
  std::vector<bool> ended_;                       // (n) the client was given its end
  std::vector<int> completion_tokens_;            // (n) tokens given to the client
  std::vector<Clock::time_point> last_token_at_;  // (n)
  int num_unfinished_;  // sequences whose end the client has not been given
  bool first_token_seen_ = false;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_REQUEST_OUTPUT_H_
