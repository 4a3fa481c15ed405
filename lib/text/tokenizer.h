// Text <-> token ids. Thread-safe: every method is const.
#ifndef PAGODA_LIB_TEXT_TOKENIZER_H_
#define PAGODA_LIB_TEXT_TOKENIZER_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

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

  // Whether `id` is an added token (tokenizer.json's added_tokens; GGUF's control and
  // user-defined tokens): text that always encodes to that one token, never to pieces.
  virtual bool IsAddedToken(int /*id*/) const { return false; }

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;

  // The model's chat template (Jinja source) when the tokenizer files carry one
  // (tokenizer_config.json's chat_template, GGUF's tokenizer.chat_template), else "".
  const std::string& chat_template() const { return chat_template_; }

  // The ids added before and after a single sequence when special tokens are added.
  const std::vector<int>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int>& suffix_ids() const { return suffix_ids_; }

  // For loaders, before the tokenizer is shared.
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }

  // Concatenated TokenBytes of `ids`, starting after `prev_id`.
  std::string Decode(std::span<const int> ids, int prev_id = -1) const;

 protected:
  // Set by the loader; constant after.
  std::vector<int> prefix_ids_, suffix_ids_;
  std::string chat_template_;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_TOKENIZER_H_
