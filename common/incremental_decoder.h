// Turns a stream of token ids into text that is only ever emitted in whole UTF-8 characters,
// so a character split over byte-fallback tokens is never sent half-way.
// Not thread-safe: one per output sequence.
#ifndef PAGODA_COMMON_INCREMENTAL_DECODER_H_
#define PAGODA_COMMON_INCREMENTAL_DECODER_H_

#include <string>

#include "common/tokenizer.h"

namespace pagoda {

class IncrementalDecoder {
 public:
  // `prev_id`: the token before the first one to decode (the prompt's last token), or -1.
  IncrementalDecoder(const Tokenizer* tokenizer, int prev_id)
      : tokenizer_(tokenizer), prev_id_(prev_id) {}

  // Adds a token and returns the text that became complete (possibly empty).
  std::string Append(int id);
  // Returns whatever is still held back (an incomplete character at the end of the stream).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;  // Not owned.
  int prev_id_;
  std::string pending_;  // bytes not yet emitted: an incomplete trailing character
};

// Length of the longest prefix of `s` that does not end inside a UTF-8 character.
size_t CompleteUtf8Prefix(const std::string& s);

}  // namespace pagoda

#endif  // PAGODA_COMMON_INCREMENTAL_DECODER_H_
