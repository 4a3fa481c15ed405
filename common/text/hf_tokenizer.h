// Hugging Face `tokenizer.json` with a BPE model, in both families:
//  - SentencePiece style (Llama 2, TinyLlama, Mistral): normalizer Prepend("▁") +
//    Replace(" " -> "▁") or the Metaspace pre-tokenizer, byte fallback to <0xXX> tokens;
//  - byte-level (Llama 3, Qwen2/3, SmolLM, GPT-2 style): any Split regex pre-tokenizers (PCRE2;
//    the Llama 3 and Qwen ones also by hand), then GPT-2's bytes-to-unicode mapping;
//    `ignore_merges` honoured.
// Merges apply by rank. Added tokens (special ones included) are matched in the text before
// anything else, as Hugging Face does. Other pre-tokenizers and normalizers are refused.
// Special tokens added around a text: the post_processor (TemplateProcessing, Bert/Roberta,
// ByteLevel, a Sequence of them), overridden by add_bos_token / add_eos_token in a
// tokenizer_config.json beside the file when it sets them (as LlamaTokenizerFast does).
#ifndef PAGODA_COMMON_TEXT_HF_TOKENIZER_H_
#define PAGODA_COMMON_TEXT_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/json.h"
#include "common/text/split_regex.h"
#include "common/text/tokenizer.h"

namespace pagoda {

// The split patterns of the byte-level tokenizers pre-tokenized by hand (PreTokenize).
inline constexpr char kLlama3Pattern[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// GPT-2's, which ByteLevel(use_regex: true) and GGUF's "gpt-2" pre-tokenizer stand for.
inline constexpr char kGpt2Pattern[] =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
inline constexpr char kQwenPattern[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

class HfTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);
  // From a parsed tokenizer.json (`what` names it in errors); tokenizer_config.json is read
  // from `config_dir` when that is not empty.
  // `fast_paths` false runs even the Llama 3 and Qwen regexes through PCRE2 (for tests).
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(const Json& j,
                                                               const std::string& what,
                                                               const std::string& config_dir,
                                                               bool fast_paths = true);

  using Tokenizer::Encode;
  std::vector<int> Encode(std::string_view text) const override;
  std::string TokenBytes(int prev_id, int id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

  // For loaders that know better than the file's names (GGUF): the special tokens around a
  // text, and BOS / EOS (kept when negative).
  void SetSpecialTokens(std::vector<int> prefix, std::vector<int> suffix, int bos, int eos) {
    prefix_ids_ = std::move(prefix);
    suffix_ids_ = std::move(suffix);
    if (bos >= 0) bos_id_ = bos;
    if (eos >= 0) eos_id_ = eos;
  }

 private:
  HfTokenizer() = default;
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

#endif  // PAGODA_COMMON_TEXT_HF_TOKENIZER_H_
