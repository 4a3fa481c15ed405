// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*):
//  - model "llama": SentencePiece-style BPE over `tokens` with `scores` (merge priority) and
//    `token_type` (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte), encoded
//    as llama.cpp's SPM tokenizer does (the same algorithm as run.c's);
//  - model "gpt2": byte-level BPE over `tokens` and `merges`, pre-tokenized by the regex the
//    `pre` name stands for in llama.cpp (llama3 / llama-bpe, qwen2, gpt-2).
// bos_token_id / eos_token_id and add_bos_token / add_eos_token (llama.cpp's defaults when
// absent: BOS for "llama" and for the llama3 pre-tokenizer) decide the special tokens;
// tokenizer.chat_template is kept for the chat API.
#ifndef PAGODA_LIB_TEXT_GGUF_TOKENIZER_H_
#define PAGODA_LIB_TEXT_GGUF_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/gguf_file.h"
#include "lib/text/tokenizer.h"

namespace pagoda {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& file);
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path);

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_GGUF_TOKENIZER_H_
