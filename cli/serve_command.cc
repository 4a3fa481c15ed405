#include "cli/serve_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

constexpr char kHelp[] = R"(usage: pagoda serve MODEL [flags]

Serves MODEL (a GGUF file, a Hugging Face model directory, or a llama2.c .bin with
--tokenizer) on this machine: the router and its local workers, the OpenAI-compatible API on
http://0.0.0.0:8000/v1 and gRPC (pagoda.v1.Generation) on port 50051. Stop it with Ctrl-C.

The flags people change first:
  --http-port=8000            the OpenAI-compatible HTTP API; 0 = off
  --port=50051                gRPC; workers on this machine use --worker-port (port + 1)
  --host=0.0.0.0              the address to listen on (127.0.0.1: this machine only)
  --api-key=KEY               clients must send "Authorization: Bearer KEY"
  --served-model-name=NAME    the name clients use as "model"; default: the file's name
  --spawn-workers=1           local workers; one uses every core and holds one copy of the
                              weights, which is fastest on one machine
  --worker-weight-dtype=auto  the weights' arithmetic in the workers (bf16, int8, ...)
  --worker-kv-cache-mb=auto   the KV cache's memory; auto: half the memory available
  --max-model-len=N           the longest prompt + output; default: the model's context
  --allowed-origins=ORIGINS   CORS for browsers: https://app.example,... or *
  --chat-template=FILE        a Jinja chat template in place of the model's own

Every pagoda-router flag works here as on pagoda-router: `pagoda-router --help` lists them
all (speculative decoding, TLS, KV transfers, limits, metrics).
)";

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "--helpfull" || arg == "-help";
}

// Whether `args` give --NAME (as --NAME=V, --NAME V, or with '_' for '-').
bool Gives(const std::vector<std::string>& args, const std::string& dashed) {
  std::string underscored = dashed;
  for (char& c : underscored) c = c == '-' ? '_' : c;
  for (const std::string& a : args) {
    for (const std::string& name : {dashed, underscored}) {
      for (const char* prefix : {"--", "-"}) {
        const std::string flag = absl::StrCat(prefix, name);
        if (a == flag || absl::StartsWith(a, flag + "=")) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::variant<std::vector<std::string>, ServeExit> ServeArguments(
    const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (IsHelp(a)) return ServeExit{kHelp, 0};
  }
  if (args.empty() || args[0].empty() || args[0][0] == '-') {
    return ServeExit{"usage: pagoda serve MODEL [flags] (pagoda serve --help lists them)\n", 2};
  }
  const std::vector<std::string> flags(args.begin() + 1, args.end());
  if (Gives(flags, "model")) {
    return ServeExit{
        "pagoda serve: the model is the first argument; --model may not be given too\n", 2};
  }
  std::vector<std::string> out = {absl::StrCat("--model=", args[0])};
  if (!Gives(flags, "spawn-workers")) out.push_back("--spawn-workers=1");
  out.insert(out.end(), flags.begin(), flags.end());
  return out;
}

int ServeCommand(const std::vector<std::string>& args, std::ostream& err) {
  auto plan = ServeArguments(args);
  if (const ServeExit* exit = std::get_if<ServeExit>(&plan)) {
    (exit->code == 0 ? std::cout : err) << exit->text;
    return exit->code;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string router = (self.parent_path() / "pagoda-router").string();
  if (ec || access(router.c_str(), X_OK) != 0) {
    err << "pagoda serve: " << router << " is missing: pagoda-router is installed beside pagoda\n";
    return 1;
  }
  std::vector<std::string> argv_strings = {router};
  for (std::string& a : std::get<std::vector<std::string>>(plan)) argv_strings.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(router.c_str(), argv.data());
  err << "pagoda serve: cannot run " << router << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace pagoda
