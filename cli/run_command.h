// `pagoda run`: the offline mode (like vLLM's `LLM`). Loads the model in this process and runs
// every prompt as one continuously batched job through the same scheduler and block manager
// the router uses, with an in-process executor.
#ifndef PAGODA_CLI_RUN_COMMAND_H_
#define PAGODA_CLI_RUN_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/sampling_params.h"
#include "router/core/engine.h"
#include "worker/worker_options.h"

namespace pagoda {

struct RunOptions {
  std::string model;      // llama2.c checkpoint or Hugging Face directory
  std::string tokenizer;  // "" = the model's default
  std::vector<std::string> prompts;
  std::optional<int> max_tokens;  // unset = up to the model length
  int n = 1;
  bool ignore_eos = false;
  bool json = false;            // one JSON object per output, in input order
  SamplingParams sampling;      // its temperature, top_p, top_k, repetition_penalty ...
  SamplingOverrides overrides;  // ... come from here, or from the model's defaults
  WorkerOptions worker;
  EngineOptions engine;
};

// Runs the job, writing results to `out` and errors to `err`. Returns the process exit code:
// 0 when every prompt succeeded, 1 when the model could not load or any prompt failed (the
// others still run and print).
int RunOffline(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_RUN_COMMAND_H_
