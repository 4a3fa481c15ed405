// `pagoda serve MODEL [flags]`: a whole server on one machine in one command, as `vllm serve
// MODEL` and `llama-server -m MODEL` are: pagoda-router (installed beside this binary) with
// --model=MODEL and local workers, the OpenAI API on port 8000 and gRPC on 50051.
#ifndef PAGODA_CLI_SERVE_COMMAND_H_
#define PAGODA_CLI_SERVE_COMMAND_H_

#include <ostream>
#include <string>
#include <variant>
#include <vector>

namespace pagoda {

// What `pagoda serve ARGS...` runs: pagoda-router's arguments (its argv[0] aside), or the text
// to print and the exit code (--help: 0; a wrong command line: 2).
struct ServeExit {
  std::string text;
  int code = 0;
};
// `args` are the words after `serve`. MODEL comes first; every other flag goes to
// pagoda-router as given. Without --spawn-workers, one local worker runs (it uses every core:
// one copy of the weights). --model may not be given as well.
std::variant<std::vector<std::string>, ServeExit> ServeArguments(
    const std::vector<std::string>& args);

// Runs pagoda-router in this process's place (exec), so signals, the exit code and the
// terminal are the router's. Returns only when it cannot (with the exit code to use).
int ServeCommand(const std::vector<std::string>& args, std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_SERVE_COMMAND_H_
