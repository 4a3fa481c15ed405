// Writes a random LoRA adapter of a model's shape as a PEFT directory, for the Node tests that
// serve adapters through the official SDK (lora_sdk_test.mjs):
//   write_test_lora MODEL_PATH OUT_DIR SEED
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/model/model_loader.h"
#include "tests/common/model/lora_files.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: write_test_lora MODEL_PATH OUT_DIR SEED\n";
    return 2;
  }
  const absl::StatusOr<pagoda::ModelConfig> config = pagoda::LoadModelConfig(argv[1]);
  if (!config.ok()) {
    std::cerr << argv[1] << ": " << config.status() << "\n";
    return 1;
  }
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  pagoda::testing::WritePeftLora(
      pagoda::testing::RandomLoraAdapter(*config, /*rank=*/8, /*alpha=*/16, seed, /*strength=*/3.0),
      *config, /*alpha=*/16, argv[2]);
  return 0;
}
