// `pagoda generate`: a client of a running router. One prompt streams its text to the terminal
// as it arrives; several (--prompts-file) run as concurrent streams over one channel. With
// --json it prints one object per sequence in input order, like `pagoda run --json`.
// A router that cannot be reached fails the command at once, naming the address.
#ifndef PAGODA_CLI_GENERATE_COMMAND_H_
#define PAGODA_CLI_GENERATE_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/sampling_params.h"

namespace pagoda {

struct GenerateOptions {
  std::string server;                // host:port of the router's public port
  std::vector<std::string> prompts;  // all sent at once, as concurrent streams
  std::optional<int> max_tokens;
  SamplingParams sampling;      // min_p, seed, presence/frequency penalties, logprobs
  SamplingOverrides overrides;  // sent only when set: the router fills the model's defaults
  int n = 1;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // each one whole stop string (commas included)
  std::vector<int> stop_token_ids;
  bool json = false;
  double timeout_s = 600;  // the call's deadline
  std::string api_key;     // "" = none; else metadata authorization: Bearer <key>
};

// Returns the exit code: 0, or 1 when the router cannot be reached or any stream failed (its
// status goes to `err`).
int GenerateCommand(const GenerateOptions& options, std::ostream& out, std::ostream& err);

// "UNAVAILABLE: message" for a failed call (the code's name, not its number).
std::string DescribeStatus(int code, const std::string& message);

}  // namespace pagoda

#endif  // PAGODA_CLI_GENERATE_COMMAND_H_
