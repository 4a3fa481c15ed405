// Hugging Face `tokenizer.json` with a BPE model, read into a BpeSpec, in both families:
//  - SentencePiece style (Llama 2, TinyLlama, Mistral): normalizer Prepend("▁") +
//    Replace(" " -> "▁") or the Metaspace pre-tokenizer (split: false), byte fallback;
//  - byte-level (Llama 3, Qwen2/3, SmolLM, GPT-2 style): Sequence[Split(regex, Isolated)...,
//    ByteLevel(use_regex: false)] or a lone ByteLevel(use_regex: true), NFC allowed.
// Other pre-tokenizers, normalizers and models are refused (UNIMPLEMENTED for pre-tokenizers
// that are well-formed but unsupported, INVALID_ARGUMENT otherwise), naming the file.
// Special tokens around a text: the post_processor (TemplateProcessing, Bert/Roberta, ByteLevel,
// a Sequence of them), overridden by add_bos_token / add_eos_token in a tokenizer_config.json
// in `config_dir` when it sets them (as LlamaTokenizerFast does); its chat_template is kept.
#ifndef PAGODA_LIB_TEXT_TOKENIZER_JSON_H_
#define PAGODA_LIB_TEXT_TOKENIZER_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "lib/text/bpe_spec.h"

namespace pagoda {

// `what` names the file in errors; no tokenizer_config.json is read when `config_dir` is "".
absl::StatusOr<BpeSpec> ReadTokenizerJson(const Json& j, const std::string& what,
                                          const std::string& config_dir);

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_TOKENIZER_JSON_H_
