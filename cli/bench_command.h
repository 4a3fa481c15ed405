// `pagoda bench`: a load generator that reports what vLLM's serving benchmark reports: completed
// and failed requests, duration, request and token throughput, TTFT, TPOT (time per output token
// after the first), ITL (inter-token latency) and end-to-end latency (mean, median, p90, p99), and
// the prefix-cache hit rate (cached / prompt tokens, from each response's usage).
//
// Workloads (prompts are token ids, so no tokenizer is needed):
//   random  prompts of random tokens; input and output lengths fixed or uniform in a range.
//   chat    conversations of --turns requests that share one long system prompt; each turn's
//           prompt is the whole history so far (system, earlier turns and their replies) plus a
//           new user message, so most of it is a cached prefix.
//   repeat  prompts of random tokens whose last third repeats the start of the passage before
//           it, as a "repeat / rewrite this" request: where the model copies, prompt lookup
//           (speculative decoding) drafts what follows.
// Load: --request-rate arrivals per second (Poisson; inf = all at once), optionally capped at
// --max-concurrency requests in flight. With --metrics=HOST:PORT it also samples the router's
// /metrics during the run (peak running sequences, KV usage and utilization).
// Backends (bench_backend.h): the router's public gRPC API (grpc, the default), or any
// OpenAI-compatible server's streamed /v1/completions (openai: Pagoda's HTTP port, vLLM,
// llama.cpp's llama-server), so the same client measures both side by side.
#ifndef PAGODA_CLI_BENCH_COMMAND_H_
#define PAGODA_CLI_BENCH_COMMAND_H_

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

namespace pagoda {

struct BenchOptions {
  std::string backend = "grpc";  // grpc | openai
  std::string server;            // grpc: the router's HOST:PORT
  std::string base_url;  // openai: http(s)://HOST:PORT[/PREFIX], POSTs PREFIX/v1/completions
  // openai: the requests' "model"; several, comma-separated, taken in turn (e.g. a model's
  // LoRA adapters); "" = GET /v1/models' first id.
  std::string model_name;
  // openai, llama-server: each request applies one of its adapters 0..lora_ids-1 in turn
  // (llama-server's per-request "lora" field); 0 = none.
  int lora_ids = 0;
  int vocab_size = 0;   // openai: ids are drawn below it; 0 = the server's (/v1/models)
  std::string api_key;  // "" = none; else sent as authorization: Bearer <key>
  // openai: a JSON object sent as every request's "response_format" (structured output's
  // cost under load); "" = none.
  std::string response_format;
  // openai: a JSON object whose fields are added to every request's body (e.g. a logit_bias
  // that keeps random weights' output valid UTF-8 for a peer that rejects anything else);
  // "" = none. It may not name a field the bench sets.
  std::string extra_request_body;
  std::string dataset = "random";  // random | chat | repeat
  int num_prompts = 100;           // requests in all (chat: turns included)
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;  // 0 = no cap
  int input_len = 128;      // random, repeat: prompt tokens; chat: tokens per user message
  int output_len = 128;     // output tokens of each request
  // > 1: requests ask for max_tokens = ratio x their output length, and the client ends each
  // stream once it has its output length, as if the model had stopped there. Models a workload
  // whose max_tokens overstates its outputs (what a reserve-for-max-length allocator pays for).
  double max_tokens_ratio = 1;
  double range_ratio = 0;  // lengths uniform in [len·(1−r), len·(1+r)]
  bool ignore_eos = false;
  // Every request's temperature: 0 is greedy; > 0 samples (a draft's hit rate with sampling).
  double temperature = 0;
  int system_prompt_len = 1024;  // chat
  int turns = 4;                 // chat: requests per conversation
  uint64_t seed = 0;
  std::string metrics;  // host:port of the router's /metrics; empty = do not sample
  bool json = false;
  bool progress = false;  // a progress bar on stderr
  double timeout_s = 600;
};

// Returns the exit code: 0 when every request completed, 1 when some failed, 2 for bad options
// or an unreachable server.
int BenchCommand(const BenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_BENCH_COMMAND_H_
