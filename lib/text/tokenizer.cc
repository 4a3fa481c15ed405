#include "lib/text/tokenizer.h"

namespace pagoda {

std::vector<int> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  if (!add_special_tokens) return Encode(text);
  std::vector<int> out = prefix_ids_;
  const std::vector<int> body = Encode(text);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
  return out;
}

std::string Tokenizer::Decode(std::span<const int> ids, int prev_id) const {
  std::string out;
  for (int id : ids) {
    out += TokenBytes(prev_id, id);
    prev_id = id;
  }
  return out;
}

}  // namespace pagoda
