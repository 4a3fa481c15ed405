// `pagoda tokenize`: encode texts with a tokenizer and show the ids and their decoding.
#ifndef PAGODA_CLI_TOKENIZE_COMMAND_H_
#define PAGODA_CLI_TOKENIZE_COMMAND_H_

#include <ostream>
#include <string>

namespace pagoda {

struct TokenizeOptions {
  std::string tokenizer;   // a tokenizer file, or a model directory holding one
  std::string text;        // one text, or
  std::string texts_file;  // a JSON array of strings
};

// Prints a JSON array with {"ids":[...],"decoded":"..."} per text (no BOS/EOS added).
// Returns the exit code.
int TokenizeCommand(const TokenizeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_TOKENIZE_COMMAND_H_
