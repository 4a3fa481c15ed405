// A BPE tokenizer as Hugging Face's `tokenizers` runs one, built from a BpeSpec (a
// tokenizer.json, tokenizer_json.h, or a GGUF "gpt2" vocabulary), in both families:
//  - SentencePiece style (Llama 2, TinyLlama, Mistral): normalizer or Metaspace marks the
//    words, byte fallback to <0xXX> tokens;
//  - byte-level (Llama 3, Qwen2/3, SmolLM, GPT-2 style): any Split regex pre-tokenizers (PCRE2;
//    the Llama 3 and Qwen ones also by hand), then GPT-2's bytes-to-unicode mapping;
//    `ignore_merges` honoured.
// Merges apply by rank. Added tokens (special ones included) are matched in the text before
// anything else, as Hugging Face does. Thread-safe: constant after construction.
#ifndef PAGODA_LIB_TEXT_HF_TOKENIZER_H_
#define PAGODA_LIB_TEXT_HF_TOKENIZER_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/json.h"
#include "lib/text/bpe_spec.h"
#include "lib/text/split_regex.h"
#include "lib/text/tokenizer.h"

namespace pagoda {

class HfTokenizer final : public Tokenizer {
 public:
  // A tokenizer.json file; tokenizer_config.json is read from its directory.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);
  // From a parsed tokenizer.json (`what` names it in errors); tokenizer_config.json is read
  // from `config_dir` when that is not empty.
  // `fast_paths` false runs even the Llama 3 and Qwen regexes through PCRE2 (for tests).
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(const Json& j,
                                                               const std::string& what,
                                                               const std::string& config_dir,
                                                               bool fast_paths = true);
  // Checks `spec` (token ids, merges, special tokens, split patterns) and builds the
  // tokenizer; INVALID_ARGUMENT naming `what` when the spec is inconsistent.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Create(const BpeSpec& spec,
                                                             const std::string& what,
                                                             bool fast_paths = true);

  using Tokenizer::Encode;
  std::vector<int> Encode(std::string_view text) const override;
  std::string TokenBytes(int prev_id, int id) const override;
  bool IsAddedToken(int id) const override {
    return id >= 0 && id < static_cast<int>(is_added_.size()) && is_added_[id];
  }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

 private:
  HfTokenizer() = default;
  // Byte-level pre-tokenization: the split regexes (or the hand-written splitter) and GPT-2's
  // byte <-> character mapping.
  absl::Status SetUpByteLevel(const std::vector<std::string>& patterns, bool fast_paths,
                              const std::string& what);
  // Pieces, ids, byte-fallback and unknown tokens, merges and added tokens.
  absl::Status SetUpVocabulary(const BpeSpec& spec, const std::string& what);
  // The id of the first of `pieces` in the vocabulary, else `fallback`.
  int FirstId(std::initializer_list<const char*> pieces, int fallback) const;
  // BPE over one normalized piece of text (no added tokens in it).
  void EncodeWord(std::string_view word, std::vector<int>* out) const;
  // Byte-level: the regex pre-tokenizer's pieces of `text`, as code point ranges.
  std::vector<std::pair<size_t, size_t>> PreTokenize(const std::u32string& cps) const;
  void EncodeByteLevel(std::string_view text, std::vector<int>* out) const;

  std::vector<std::string> pieces_;  // (vocab) the token's string, "▁" kept
  absl::flat_hash_map<std::string, int> ids_;
  // (left id, right id) -> (rank, merged id)
  absl::flat_hash_map<uint64_t, std::pair<int, int>> merges_;
  std::vector<int> byte_ids_;  // (256) <0xXX> ids, -1 when absent
  struct Added {
    std::string content;
    int id;
  };
  std::vector<Added> added_;  // longest first
  int unk_id_ = -1;
  int bos_id_ = 1, eos_id_ = 2;
  std::string prepend_;  // normalizer: prepended to non-empty text
  // Metaspace pre-tokenizer (split: false): spaces become `metaspace_`, then it is prepended
  // unless the text starts with it; with prepend_scheme "first" only to the text's first
  // segment (not after an added token).
  std::string metaspace_;
  bool metaspace_first_only_ = false;
  std::vector<std::pair<std::string, std::string>> replacements_;  // normalizer: in order
  bool strip_leading_space_ = false;                               // decoder: Strip(" ", 1, 0)
  bool byte_level_ = false;
  bool nfc_ = false;            // normalizer: NFC (Qwen)
  int max_digits_ = 3;          // byte-level: \p{N}{1,3} (Llama 3) or \p{N} (Qwen)
  bool ignore_merges_ = false;  // a pre-token that is itself a token is taken whole
  std::vector<std::unique_ptr<SplitRegex>> splits_;    // PCRE2 splits; empty: PreTokenize
  std::vector<std::string> byte_chars_;                // (256) byte -> its unicode stand-in
  absl::flat_hash_map<uint32_t, uint8_t> char_bytes_;  // and back
  std::vector<bool> is_added_;                         // (vocab) whether an added token's id
};

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_HF_TOKENIZER_H_
