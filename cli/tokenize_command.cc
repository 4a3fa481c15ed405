#include "cli/tokenize_command.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "common/json.h"
#include "lib/text/tokenizer_loader.h"

namespace pagoda {

int TokenizeCommand(const TokenizeOptions& options, std::ostream& out, std::ostream& err) {
  // A tokenizer.bin, a tokenizer.json, or a model directory holding one.
  const std::string& path = options.tokenizer;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) {
    err << "error: " << tokenizer.status().message() << "\n";
    return 1;
  }
  std::vector<std::string> texts;
  if (!options.texts_file.empty()) {
    std::ifstream in(options.texts_file);
    if (!in) {
      err << "error: cannot open --texts_file " << options.texts_file << "\n";
      return 2;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    const absl::StatusOr<Json> list = ParseJson(buffer.str(), options.texts_file);
    if (!list.ok()) {
      err << "error: " << list.status().message() << "\n";
      return 2;
    }
    if (!list->is_array()) {
      err << "error: " << options.texts_file << ": not a JSON array of strings\n";
      return 2;
    }
    for (const Json& v : *list) {
      if (!v.is_string()) {
        err << "error: " << options.texts_file << ": every element must be a string\n";
        return 2;
      }
      texts.push_back(v.get<std::string>());
    }
  } else {
    texts.push_back(options.text);
  }
  out << "[";
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int> ids = (*tokenizer)->Encode(texts[i]);
    out << (i ? ",\n " : "")
        << JsonDump(OrderedJson{{"ids", ids}, {"decoded", (*tokenizer)->Decode(ids)}});
  }
  out << "]\n";
  return 0;
}

}  // namespace pagoda
