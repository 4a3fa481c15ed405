#include "common/tokenizer.h"

#include "common/llama2c_tokenizer.h"

namespace pagoda {

std::string Tokenizer::Decode(std::span<const int> ids, int prev_id) const {
  std::string out;
  for (int id : ids) {
    out += TokenBytes(prev_id, id);
    prev_id = id;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         int expected_vocab_size) {
  return Llama2cTokenizer::Load(path, expected_vocab_size);
}

}  // namespace pagoda
