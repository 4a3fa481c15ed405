// llama2.c's tokenizer (`tokenizer.bin`, `tok512.bin`), encoding exactly as run.c does:
// a dummy-prefix space, one token per UTF-8 character (or its bytes as <0xXX> tokens when the
// character is not in the vocabulary), then repeatedly the highest-scoring adjacent merge
// (leftmost on ties) until none applies.
//
// File: int32 max_token_length, then per token {float32 score, int32 len, char bytes[len]};
// the vocabulary size is the number of entries up to the end of the file.
// With special tokens, BOS (1) comes first, as run.c always adds it.
#ifndef PAGODA_LIB_TEXT_LLAMA2C_TOKENIZER_H_
#define PAGODA_LIB_TEXT_LLAMA2C_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/text/tokenizer.h"

namespace pagoda {

class Llama2cTokenizer final : public Tokenizer {
 public:
  // `expected_vocab_size` > 0: a file with another number of entries is an error.
  static absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Load(const std::string& path,
                                                                int expected_vocab_size = 0);

  using Tokenizer::Encode;
  std::vector<int> Encode(std::string_view text) const override;
  std::string TokenBytes(int prev_id, int id) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

  // A SentencePiece-style vocabulary from elsewhere (GGUF's `llama` tokenizer model): pieces
  // with ' ' for U+2581, merge scores, and whether each piece may be produced from text
  // (control, unknown and unused tokens may not). Byte tokens are looked up as <0xXX>.
  struct Vocab {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<bool> matchable;
    int bos_id = 1, eos_id = 2;
    bool add_bos = true, add_eos = false;
  };
  static absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> FromVocab(Vocab vocab);

 private:
  Llama2cTokenizer() = default;
  int Lookup(std::string_view piece) const;  // -1 when absent

  std::vector<std::string> pieces_;            // (vocab_size) raw bytes, ' ' in place of U+2581
  std::vector<float> scores_;                  // (vocab_size) merge priority
  absl::flat_hash_map<std::string, int> ids_;  // piece -> lowest id with that piece
  std::vector<int> byte_ids_;                  // (256) id of <0xXX>: b + 3 in run.c's files
  int bos_id_ = 1, eos_id_ = 2;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_LLAMA2C_TOKENIZER_H_
