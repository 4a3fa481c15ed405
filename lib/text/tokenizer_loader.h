// Finds and loads tokenizers: by file (a llama2.c `tokenizer.bin`, a Hugging Face
// `tokenizer.json`, a GGUF file's vocabulary, or a directory holding one), or the one that goes
// with a model. text/ reads model files (GGUF's vocabulary, HF directories) through model/;
// model/ knows nothing of tokenizers.
#ifndef PAGODA_LIB_TEXT_TOKENIZER_LOADER_H_
#define PAGODA_LIB_TEXT_TOKENIZER_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "lib/text/tokenizer.h"

namespace pagoda {

// Loads a tokenizer: a llama2.c `tokenizer.bin`, a Hugging Face `tokenizer.json`, a GGUF file's
// vocabulary, or a model directory holding a tokenizer (tokenizer.json first).
// `expected_vocab_size` > 0 makes a different vocabulary size an error.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         int expected_vocab_size = 0);

// The tokenizer to use with `model_path` when none is given: `tokenizer.bin` beside a
// llama2.c checkpoint, `tokenizer.json` in a Hugging Face directory, a GGUF file itself.
std::string DefaultTokenizerPath(const std::string& model_path);

// Loads `tokenizer_path` (or the default for the model) and checks it against `config`.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& model_path,
                                                              const std::string& tokenizer_path,
                                                              const ModelConfig& config);

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_TOKENIZER_LOADER_H_
