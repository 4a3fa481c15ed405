// pagoda-make-model: writes a random-weight llama2.c checkpoint of a named shape, for
// benchmarks (values don't matter for speed).
//   pagoda-make-model --shape=stories110M --out=/tmp/stories110M.bin [--seed=1]
#include <iostream>

#include "absl/flags/flag.h"
#include "common/command_line.h"
#include "common/llama2c_checkpoint.h"
#include "common/random_weights.h"

ABSL_FLAG(std::string, shape, "stories110M",
          "stories260K, stories15M, stories42M, stories110M, 1B");
ABSL_FLAG(std::string, out, "", "output .bin path");
ABSL_FLAG(uint64_t, seed, 1, "random seed");

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(argc, argv);
  pagoda::ModelConfig config;
  if (!pagoda::NamedModelConfig(absl::GetFlag(FLAGS_shape), &config)) {
    std::cerr << "error: unknown --shape " << absl::GetFlag(FLAGS_shape) << "\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::cerr << "error: --out is required\n";
    return 2;
  }
  const absl::Status s = pagoda::WriteLlama2cCheckpoint(
      pagoda::RandomModelWeights(config, absl::GetFlag(FLAGS_seed)), absl::GetFlag(FLAGS_out));
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
