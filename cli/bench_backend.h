// How `pagoda bench` sends one request and times it: over the router's public gRPC API
// (Generate), or over an OpenAI-compatible server's POST /v1/completions with "stream": true
// (Server-Sent Events: `data: {...}` chunks, then `data: [DONE]`). Both report the same record,
// so the report does not know which one ran.
#ifndef PAGODA_CLI_BENCH_BACKEND_H_
#define PAGODA_CLI_BENCH_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/bench_command.h"

namespace pagoda {

// One request as the client saw it.
struct BenchRecord {
  bool ok = false;
  std::string error;
  int prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  double ttft = 0, e2e = 0;  // seconds from sending
  std::vector<double> itl;   // seconds between successive token arrivals
};

// What the workload must know of the served model; 0 = the server did not say.
struct ServedModel {
  int context_length = 0;
  int vocab_size = 0;
};

class BenchBackend {
 public:
  virtual ~BenchBackend() = default;

  // Asks the server about its model. An error says why in a line the command prints after
  // "error: " ("cannot connect to ..." when nothing answers).
  virtual absl::StatusOr<ServedModel> Connect() = 0;

  // One streamed greedy request of `prompt` (token ids) for up to `max_tokens`, ended by the
  // client once `stop_after` tokens arrived (when below max_tokens); `output` (if set) gets the
  // generated ids. Thread-safe; REQUIRES: Connect() succeeded.
  virtual BenchRecord Send(const std::vector<int>& prompt, int max_tokens, int stop_after,
                           std::vector<int>* output) = 0;
};

// `options` must outlive the backend.
std::unique_ptr<BenchBackend> MakeGrpcBenchBackend(const BenchOptions& options);
// Token ids are not part of OpenAI's stream: chunks count as tokens (usage.completion_tokens
// gives the total when the server sends it), and `output` gets the ids only when the chunks
// carry them (`token_ids`); otherwise it gets stand-ins of the same length (the prompt's last
// ids), so a chat history still grows as the replies do.
std::unique_ptr<BenchBackend> MakeOpenAiBenchBackend(const BenchOptions& options);
// The body fields MakeOpenAiBenchBackend's requests set themselves, which
// BenchOptions::extra_request_body may not.
inline constexpr const char* kOpenAiBenchFields[] = {
    "model",          "prompt", "max_tokens", "temperature",    "stream",
    "stream_options", "lora",   "ignore_eos", "response_format"};

}  // namespace pagoda

#endif  // PAGODA_CLI_BENCH_BACKEND_H_
