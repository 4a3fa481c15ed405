// What a BPE tokenizer is made of, whichever file described it: a Hugging Face tokenizer.json
// (ReadTokenizerJson, tokenizer_json.h) or a GGUF "gpt2" vocabulary (gguf_tokenizer.h).
// HfTokenizer::Create checks it and builds the tokenizer. A plain value: no validation here.
#ifndef PAGODA_LIB_TEXT_BPE_SPEC_H_
#define PAGODA_LIB_TEXT_BPE_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagoda {

// The split patterns of the byte-level tokenizers pre-tokenized by hand (HfTokenizer's
// PreTokenize); any other pattern runs through PCRE2.
inline constexpr char kLlama3Pattern[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// GPT-2's, which ByteLevel(use_regex: true) and GGUF's "gpt-2" pre-tokenizer stand for.
inline constexpr char kGpt2Pattern[] =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
inline constexpr char kQwenPattern[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct BpeSpec {
  // How text is cut into words before BPE.
  enum class PreTokenizer {
    kNone,       // SentencePiece style: the normalizer alone marks the words
    kMetaspace,  // spaces become `metaspace`, which is prepended to the segment
    kByteLevel,  // `split_patterns`, then GPT-2's bytes-to-unicode mapping
  };
  struct AddedToken {
    std::string content;
    int64_t id;
  };

  // (piece, id) in the file's order; ids may leave gaps, a later entry for an id replaces the
  // piece it decodes to, and a piece listed twice is encoded as its lowest id.
  std::vector<std::pair<std::string, int64_t>> vocab;
  // The merges by rank (their position): the two pieces that merge into their concatenation.
  std::vector<std::pair<std::string, std::string>> merges;
  // Matched in the raw text before anything else (special tokens among them), longest first;
  // tokens with empty content are ignored.
  std::vector<AddedToken> added_tokens;
  std::string unk_token;       // "": characters out of the vocabulary are dropped
  bool byte_fallback = false;  // characters out of the vocabulary become <0xXX> tokens
  bool ignore_merges = false;  // a byte-level pre-token that is itself a token is taken whole

  PreTokenizer pre_tokenizer = PreTokenizer::kNone;
  std::string metaspace;              // kMetaspace: the space's stand-in ("▁")
  bool metaspace_first_only = false;  // kMetaspace: prepended to the text's first segment only
  std::vector<std::string> split_patterns;  // kByteLevel: Split regexes, applied in order

  // Normalizer, applied in this order.
  bool nfc = false;                                               // byte-level only
  std::string prepend;                                            // to non-empty text
  std::vector<std::pair<std::string, std::string>> replacements;  // (from, to), in order
  // Decoder: the first token after BOS loses its leading space.
  bool strip_leading_space = false;

  // -1: the id of the first of <s>, <|begin_of_text|>, <|endoftext|> (</s>, <|end_of_text|>,
  // <|endoftext|>) in the vocabulary, else 1 (2).
  int bos_id = -1;
  int eos_id = -1;
  std::vector<int> prefix_ids, suffix_ids;  // added around a single sequence
  std::string chat_template;

  // Piece -> its lowest id, over the vocabulary and the added tokens: what special-token names
  // in a file resolve to.
  absl::flat_hash_map<std::string, int> TokenIds() const;
};

// A merge written "a b" as its two pieces; false when it has no space.
bool SplitMerge(std::string_view merge, std::pair<std::string, std::string>* pieces);

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_BPE_SPEC_H_
