// The weights' part of a model's fingerprint: a digest of the bytes of its weight files, so two
// fine-tunes of one base model (same shape, other weights) are different models to the router.
// The router computes it from the files it reads the config of; each worker from the files it
// loads. Both read every byte once (XXH3-128, at memory speed once the pages are cached).
#ifndef PAGODA_COMMON_MODEL_WEIGHTS_DIGEST_H_
#define PAGODA_COMMON_MODEL_WEIGHTS_DIGEST_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace pagoda {

// 32 hex digits over the weight files of `model_path`: the file itself (a llama2.c checkpoint
// or a GGUF file), or every `*.safetensors` file of a Hugging Face directory in name order
// (a copy under another name is the same model). NOT_FOUND / INVALID_ARGUMENT naming the path when
// a file cannot be read.
// `progress`, when given, is called after each read with the bytes hashed so far and in all.
absl::StatusOr<std::string> WeightsDigest(
    const std::string& model_path,
    const std::function<void(int64_t done, int64_t total)>& progress = nullptr);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_WEIGHTS_DIGEST_H_
