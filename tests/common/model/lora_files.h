// LoRA adapters for tests: random ones of a model's shape, written as a PEFT directory or a GGUF
// LoRA (as llama.cpp's convert_lora_to_gguf.py lays it out), and merged into base weights in
// float64 (W + scale · B · A), the reference the worker's low-rank path must match.
#ifndef PAGODA_TESTS_COMMON_MODEL_LORA_FILES_H_
#define PAGODA_TESTS_COMMON_MODEL_LORA_FILES_H_

#include <cstdint>
#include <string>

#include "common/model/lora_adapter.h"
#include "common/model/model_weights.h"
#include "common/model/safetensors.h"

namespace pagoda::testing {

// Every target of every layer of `config`, rank `rank`, A ~ U(±1/sqrt(in)) and B ~ U(±b) with
// b chosen so that scale · B · A moves a matrix's output by about `strength` times a random
// base matrix's; B's rows in the base's order (as ReadLoraAdapter returns them). `scale` is
// alpha / rank.
LoraAdapter RandomLoraAdapter(const ModelConfig& config, int rank, double alpha, uint64_t seed,
                              double strength = 0.2);

// A PEFT directory (adapter_config.json + adapter_model.safetensors in `dtype`) of `adapter`,
// q/k B rows in Hugging Face's order, with lora_alpha `alpha`. `extra_config` (JSON members,
// e.g. `"use_dora": true`) goes into the config as given.
void WritePeftLora(const LoraAdapter& adapter, const ModelConfig& base, double alpha,
                   const std::string& dir, TensorDtype dtype = TensorDtype::kF32,
                   const std::string& extra_config = "");
// A GGUF LoRA of `adapter` for architecture `arch` (llama: q/k B rows interleaved, as the
// converter permutes them), adapter.lora.alpha `alpha`, tensors F32.
void WriteGgufLora(const LoraAdapter& adapter, const ModelConfig& base, const std::string& arch,
                   double alpha, const std::string& path);

// `base` with every target W replaced by W + adapter.scale · B · A, computed in float64.
ModelWeights MergeLora(const ModelWeights& base, const LoraAdapter& adapter);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_COMMON_MODEL_LORA_FILES_H_
