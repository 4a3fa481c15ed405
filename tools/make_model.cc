// pagoda-make-model: writes a random-weight model of a named shape, for benchmarks (values
// don't matter for speed): a llama2.c checkpoint, or a Hugging Face directory (config.json +
// model.safetensors in F32, F16 or BF16).
//   pagoda-make-model --shape=stories110M --out=/tmp/stories110M.bin [--seed=1]
//   pagoda-make-model --shape=1B --format=hf --dtype=bf16 --out=/tmp/tinyllama-shaped
#include <iostream>

#include "absl/flags/flag.h"
#include "common/model/hf_model.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "common/process/command_line.h"

ABSL_FLAG(std::string, shape, "stories110M",
          "stories260K, stories15M, stories42M, stories110M, 1B");
ABSL_FLAG(std::string, out, "", "output: a .bin path (llama2c) or a directory (hf)");
ABSL_FLAG(std::string, format, "llama2c", "llama2c | hf");
ABSL_FLAG(std::string, dtype, "f32", "hf: f32 | f16 | bf16");
ABSL_FLAG(uint64_t, seed, 1, "random seed");

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(
      argc, argv,
      {"pagoda-make-model",
       "pagoda-make-model --shape=S --out=PATH [--format=llama2c|hf] [--dtype=bf16] [--seed=N]\n"
       "Writes a model of a named shape with random weights, for benchmarks.\n",
       {{"Model", {"shape", "format", "dtype", "seed", "out"}}}});
  pagoda::ModelConfig config;
  if (!pagoda::NamedModelConfig(absl::GetFlag(FLAGS_shape), &config)) {
    std::cerr << "error: unknown --shape " << absl::GetFlag(FLAGS_shape) << "\n";
    return 2;
  }
  const std::string out = absl::GetFlag(FLAGS_out), format = absl::GetFlag(FLAGS_format);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (out.empty() || (format != "llama2c" && format != "hf") ||
      (dtype != "f32" && dtype != "f16" && dtype != "bf16")) {
    std::cerr << "error: need --out, --format=llama2c|hf and --dtype=f32|f16|bf16\n";
    return 2;
  }
  const pagoda::ModelWeights weights =
      pagoda::RandomModelWeights(config, absl::GetFlag(FLAGS_seed));
  const absl::Status s = format == "llama2c"
                             ? pagoda::WriteLlama2cCheckpoint(weights, out)
                             : pagoda::WriteHfModel(weights, out,
                                                    dtype == "f32"   ? pagoda::TensorDtype::kF32
                                                    : dtype == "f16" ? pagoda::TensorDtype::kF16
                                                                     : pagoda::TensorDtype::kBF16);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
