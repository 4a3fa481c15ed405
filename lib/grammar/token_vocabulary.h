// A model's vocabulary as the token mask reads it: each token's bytes in a byte trie laid out
// in depth-first order, so a walk that finds a prefix dead skips its whole subtree by index.
// Immutable; build one per tokenizer and share it among every grammar and sequence.
//
//   nodes (preorder):  [ "a" | "ab" | "abc" | "b" ... ]
//   node.end:           one past the node's last descendant: a dead "a" jumps to "b"
#ifndef PAGODA_LIB_GRAMMAR_TOKEN_VOCABULARY_H_
#define PAGODA_LIB_GRAMMAR_TOKEN_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagoda {

class TokenVocabulary {
 public:
  struct Node {
    uint32_t end;           // one past the last node of this subtree
    uint32_t tokens_begin;  // this node's tokens: node_tokens()[tokens_begin, tokens_end)
    uint32_t tokens_end;
    uint16_t depth;  // 1 for a first byte
    uint8_t byte;
  };

  // `token_bytes[id]` is what token `id` decodes to mid-text. An empty string marks a token
  // a grammar never allows (special tokens); `eos_ids` are allowed exactly when the grammar is
  // complete. INVALID_ARGUMENT for an EOS id out of range or a token over 65535 bytes.
  static absl::StatusOr<std::shared_ptr<const TokenVocabulary>> Create(
      std::vector<std::string> token_bytes, std::vector<int> eos_ids);

  int size() const { return tokens_.size(); }
  const std::string& bytes(int id) const { return tokens_[id]; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& node_tokens() const { return node_tokens_; }
  int max_depth() const { return max_depth_; }
  // 64-bit words in a mask: one bit per token id.
  int mask_words() const { return (size() + 63) / 64; }

 private:
  std::vector<std::string> tokens_;
  std::vector<int> eos_ids_;
  std::vector<Node> nodes_;
  std::vector<int32_t> node_tokens_;
  int max_depth_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_TOKEN_VOCABULARY_H_
