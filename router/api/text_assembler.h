// Turns one sequence's tokens into the text a client sees: decoded incrementally (whole UTF-8
// characters only) and cut before the first stop string, even one split across tokens. Text
// that could still be the start of a stop string is held back until it cannot.
// Not thread-safe: one per output sequence.
#ifndef PAGODA_ROUTER_API_TEXT_ASSEMBLER_H_
#define PAGODA_ROUTER_API_TEXT_ASSEMBLER_H_

#include <string>
#include <vector>

#include "lib/text/incremental_decoder.h"

namespace pagoda {

class TextAssembler {
 public:
  // `prev_id`: the prompt's last token. `stops`: non-empty strings.
  TextAssembler(const Tokenizer* tokenizer, int prev_id, std::vector<std::string> stops);

  // Adds a token and returns the text that may be sent now. Once a stop string appears it
  // returns the text before it, sets stopped(), and returns "" from then on.
  std::string Add(int token_id);
  // The held-back tail, at the end of the sequence (nothing once stopped).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  IncrementalDecoder decoder_;
  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string held_;  // decoded, not yet sent
  bool stopped_ = false;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_TEXT_ASSEMBLER_H_
