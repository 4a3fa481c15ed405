// What the simulated clients ask (both the gRPC and the HTTP load), and what they count.
#ifndef PAGODA_TOOLS_FLEET_SIM_LOAD_OPTIONS_H_
#define PAGODA_TOOLS_FLEET_SIM_LOAD_OPTIONS_H_

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tools/fleet_sim/latency_samples.h"

namespace pagoda::fleet {

struct LoadOptions {
  std::string address;  // host:port of the router's gRPC or HTTP port
  std::string model;    // the served model name (HTTP)
  int streams = 4;      // concurrent streams, each asking again when its request ends
  int prompt_tokens = 64;
  int shared_prompt_tokens = 32;  // of those, the same for every request (a system prompt)
  int max_tokens = 128;
  int token_lo = 259;  // prompt ids are uniform in [token_lo, token_hi)
  int token_hi = 512;
  // Under the router's --max-streams-per-connection (256) and what its HAProxy allows (100).
  int streams_per_connection = 100;
};

// The clients' counts. Samples are recorded only while `recording`.
struct LoadStats {
  std::atomic<bool> recording{false};
  std::atomic<int64_t> tokens{0};
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> failures{0};
  LatencySamples token_ms;  // per token at the client: a response's gap over its tokens
  LatencySamples ttft_ms;
};

// A request's prompt: the shared part, then ids of its own.
inline std::vector<int> MakePrompt(const LoadOptions& o, std::mt19937& rng) {
  std::uniform_int_distribution<int> id(o.token_lo, o.token_hi - 1);
  std::vector<int> prompt(o.prompt_tokens);
  for (int i = 0; i < o.prompt_tokens; ++i) {
    prompt[i] =
        i < o.shared_prompt_tokens ? o.token_lo + (i * 37) % (o.token_hi - o.token_lo) : id(rng);
  }
  return prompt;
}

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_LOAD_OPTIONS_H_
