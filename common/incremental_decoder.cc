#include "common/incremental_decoder.h"

namespace pagoda {

size_t CompleteUtf8Prefix(const std::string& s) {
  // Look back at most 3 bytes for the lead byte of a character that is still missing bytes.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = s[n - back];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return need > back ? n - back : n;
  }
  return n;
}

std::string IncrementalDecoder::Append(int id) {
  pending_ += tokenizer_->TokenBytes(prev_id_, id);
  prev_id_ = id;
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace pagoda
