#include "router/api/text_assembler.h"

#include <algorithm>

namespace pagoda {

TextAssembler::TextAssembler(const Tokenizer* tokenizer, int prev_id,
                             std::vector<std::string> stops)
    : decoder_(tokenizer, prev_id), stops_(std::move(stops)) {
  for (const std::string& s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
}

std::string TextAssembler::Add(int token_id) {
  if (stopped_) return "";
  held_ += decoder_.Append(token_id);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the last longest_stop - 1 bytes (a stop string may be completing), cut at a
  // character boundary so only whole characters are sent.
  if (held_.size() < longest_stop_) return "";
  size_t send = held_.size() - (longest_stop_ == 0 ? 0 : longest_stop_ - 1);
  while (send > 0 && send < held_.size() && (held_[send] & 0xC0) == 0x80) --send;
  std::string out = held_.substr(0, send);
  held_.erase(0, send);
  return out;
}

std::string TextAssembler::Flush() {
  if (stopped_) return "";
  std::string out = held_ + decoder_.Flush();
  held_.clear();
  return out;
}

}  // namespace pagoda
