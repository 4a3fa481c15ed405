// Writes a random LoRA adapter of a model's shape, for the Node tests that serve adapters
// through the official SDK (lora_sdk_test.mjs) and for tools/lora_serving_bench.sh:
//   write_test_lora MODEL_PATH OUT SEED [RANK [peft|gguf]]
// peft (the default): a PEFT directory; gguf: a GGUF LoRA file as llama.cpp's
// convert_lora_to_gguf.py writes it (llama-server and Pagoda both read it). Rank 8 by default,
// alpha twice the rank.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/model/model_loader.h"
#include "tests/common/model/lora_files.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::cerr << "usage: write_test_lora MODEL_PATH OUT SEED [RANK [peft|gguf]]\n";
    return 2;
  }
  const absl::StatusOr<pagoda::ModelConfig> config = pagoda::LoadModelConfig(argv[1]);
  if (!config.ok()) {
    std::cerr << argv[1] << ": " << config.status() << "\n";
    return 1;
  }
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  const int rank = argc > 4 ? std::atoi(argv[4]) : 8;
  const std::string format = argc > 5 ? argv[5] : "peft";
  if (rank < 1 || rank > 256 || (format != "peft" && format != "gguf")) {
    std::cerr << "RANK must be in [1, 256] and the format peft or gguf\n";
    return 2;
  }
  const double alpha = 2.0 * rank;
  const pagoda::LoraAdapter adapter =
      pagoda::testing::RandomLoraAdapter(*config, rank, alpha, seed, /*strength=*/3.0);
  if (format == "gguf") {
    pagoda::testing::WriteGgufLora(adapter, *config, "llama", alpha, argv[2]);
  } else {
    pagoda::testing::WritePeftLora(adapter, *config, alpha, argv[2]);
  }
  return 0;
}
