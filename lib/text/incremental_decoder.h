// Turns a stream of token ids into text that is only ever emitted in whole, valid UTF-8
// characters: a character split over byte-fallback tokens is never sent half-way, and bytes
// that form no character (possible from any model, certain from a random one) become U+FFFD.
// Not thread-safe: one per output sequence.
#ifndef PAGODA_LIB_TEXT_INCREMENTAL_DECODER_H_
#define PAGODA_LIB_TEXT_INCREMENTAL_DECODER_H_

#include <string>

#include "lib/text/tokenizer.h"

namespace pagoda {

class IncrementalDecoder {
 public:
  // `prev_id`: the token before the first one to decode (the prompt's last token), or -1.
  IncrementalDecoder(const Tokenizer* tokenizer, int prev_id)
      : tokenizer_(tokenizer), prev_id_(prev_id) {}

  // Adds a token and returns the text that became complete (possibly empty).
  std::string Append(int id);
  // Returns whatever is still held back (an incomplete character at the end of the stream,
  // as U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;  // Not owned.
  int prev_id_;
  std::string pending_;  // bytes not yet emitted: an incomplete trailing character
};

}  // namespace pagoda

#endif  // PAGODA_LIB_TEXT_INCREMENTAL_DECODER_H_
