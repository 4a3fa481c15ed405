#include "cli/tokenize_command.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "common/json_writer.h"
#include "common/text/tokenizer.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

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
    google::protobuf::ListValue list;
    const auto status = google::protobuf::util::JsonStringToMessage(buffer.str(), &list);
    if (!status.ok()) {
      err << "error: " << options.texts_file
          << ": not a JSON array of strings: " << status.ToString() << "\n";
      return 2;
    }
    for (const google::protobuf::Value& v : list.values()) {
      if (v.kind_case() != google::protobuf::Value::kStringValue) {
        err << "error: " << options.texts_file << ": every element must be a string\n";
        return 2;
      }
      texts.push_back(v.string_value());
    }
  } else {
    texts.push_back(options.text);
  }
  out << "[";
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int> ids = (*tokenizer)->Encode(texts[i]);
    out << (i ? ",\n " : "") << "{\"ids\":" << JsonIntArray(ids)
        << ",\"decoded\":" << JsonQuote((*tokenizer)->Decode(ids)) << "}";
  }
  out << "]\n";
  return 0;
}

}  // namespace pagoda
