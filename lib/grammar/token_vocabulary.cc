#include "lib/grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Create(
    std::vector<std::string> token_bytes, std::vector<int> eos_ids) {
  auto v = std::make_shared<TokenVocabulary>();
  for (int id : eos_ids) {
    if (id < 0 || id >= static_cast<int>(token_bytes.size())) {
      return absl::InvalidArgumentError(absl::StrCat("EOS id ", id, " is not in the vocabulary"));
    }
  }
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (token_bytes[id].size() > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("token ", id, " is over 65535 bytes"));
    }
    const bool eos = std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
    if (!token_bytes[id].empty() && !eos) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[a] != token_bytes[b] ? token_bytes[a] < token_bytes[b] : a < b;
  });
  // Sorted strings give the preorder: a string's nodes follow the longest prefix it shares
  // with the one before; the nodes deeper than that prefix are closed.
  std::vector<uint32_t> open;  // node index per depth - 1
  std::string prev;
  for (int32_t id : order) {
    const std::string& s = token_bytes[id];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (open.size() > common) {
      v->nodes_[open.back()].end = v->nodes_.size();
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(v->nodes_.size());
      const uint32_t here = v->node_tokens_.size();
      v->nodes_.push_back(
          {0, here, here, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    // Tokens with the same bytes share the node; they are adjacent in `order`.
    Node& last = v->nodes_[open.back()];
    if (last.tokens_end != v->node_tokens_.size()) {
      last.tokens_begin = last.tokens_end = v->node_tokens_.size();
    }
    v->node_tokens_.push_back(id);
    ++last.tokens_end;
    v->max_depth_ = std::max<int>(v->max_depth_, s.size());
    prev = s;
  }
  while (!open.empty()) {
    v->nodes_[open.back()].end = v->nodes_.size();
    open.pop_back();
  }
  v->tokens_ = std::move(token_bytes);
  v->eos_ids_ = std::move(eos_ids);
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

}  // namespace pagoda
