// Text <-> token ids. Thread-safe: every method is const.
#ifndef PAGODA_COMMON_TOKENIZER_H_
#define PAGODA_COMMON_TOKENIZER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes `text` without BOS or EOS.
  virtual std::vector<int> Encode(std::string_view text) const = 0;
  // With `add_special_tokens`, `text` is wrapped in the tokens the tokenizer itself adds to a
  // single sequence (tokenizer.json's post_processor, tokenizer_config.json's add_bos_token /
  // add_eos_token, GGUF's add_bos_token; always BOS for llama2.c): what `transformers`
  // tokenizer(text).input_ids gives. A chat template writes its own BOS and passes false.
  std::vector<int> Encode(std::string_view text, bool add_special_tokens) const;

  // The bytes token `id` stands for when it follows `prev_id` (-1 at the start of the text).
  // May be part of a UTF-8 character (byte-fallback tokens). Unknown ids give "".
  virtual std::string TokenBytes(int prev_id, int id) const = 0;

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;

  // The ids added before and after a single sequence when special tokens are added.
  const std::vector<int>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int>& suffix_ids() const { return suffix_ids_; }

  // Concatenated TokenBytes of `ids`, starting after `prev_id`.
  std::string Decode(std::span<const int> ids, int prev_id = -1) const;

 protected:
  // Set by the loader; constant after.
  std::vector<int> prefix_ids_, suffix_ids_;
};

// Loads a tokenizer: a llama2.c `tokenizer.bin`, a Hugging Face `tokenizer.json`, or a model
// directory holding one (tokenizer.json first).
// `expected_vocab_size` > 0 makes a different vocabulary size an error.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         int expected_vocab_size = 0);

}  // namespace pagoda

#endif  // PAGODA_COMMON_TOKENIZER_H_
