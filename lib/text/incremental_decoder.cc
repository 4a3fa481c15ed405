#include "lib/text/incremental_decoder.h"

#include "lib/text/utf8.h"

namespace pagoda {

std::string IncrementalDecoder::Append(int id) {
  pending_ += tokenizer_->TokenBytes(prev_id_, id);
  prev_id_ = id;
  std::string out;
  pending_.erase(0, AppendValidUtf8(pending_, /*hold_incomplete=*/true, &out));
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out = ValidUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace pagoda
