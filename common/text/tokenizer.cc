#include "common/text/tokenizer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/gguf_file.h"
#include "common/text/gguf_tokenizer.h"
#include "common/text/hf_tokenizer.h"
#include "common/text/llama2c_tokenizer.h"

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

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         int expected_vocab_size) {
  if (std::filesystem::is_directory(path)) {
    const std::string json = path + "/tokenizer.json";
    return LoadTokenizer(std::filesystem::exists(json) ? json : path + "/tokenizer.bin",
                         expected_vocab_size);
  }
  if (IsGgufFile(path)) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadGgufTokenizer(path);
    if (!t.ok()) return t.status();
    if (expected_vocab_size > 0 && (*t)->vocab_size() > expected_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", (*t)->vocab_size(), " tokens but the model has ", expected_vocab_size));
    }
    return t;
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::Load(path);
    if (!t.ok()) return t.status();
    // A model may have more rows than its tokenizer has tokens (padding), never fewer.
    if (expected_vocab_size > 0 && (*t)->vocab_size() > expected_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", (*t)->vocab_size(), " tokens but the model has ", expected_vocab_size));
    }
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  return Llama2cTokenizer::Load(path, expected_vocab_size);
}

}  // namespace pagoda
