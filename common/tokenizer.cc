#include "common/tokenizer.h"

#include "absl/strings/str_cat.h"
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
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    return absl::UnimplementedError(
        absl::StrCat(path,
                     ": tokenizer.json is not supported yet; pass --tokenizer with a "
                     "llama2.c tokenizer.bin"));
  }
  return Llama2cTokenizer::Load(path, expected_vocab_size);
}

}  // namespace pagoda
