#include "common/process/body_budget.h"

namespace pagoda {

const char* BodyBudget::Admit(const HttpHead& head, Share* share) {
  absl::MutexLock lock(&mu_);
  if (head.body == HttpHead::Body::kChunked) {
    if (chunked_in_flight_ >= max_chunked_) {
      return "too many chunked request bodies at once; send Content-Length";
    }
    ++chunked_in_flight_;
    share->chunked_slot = true;
  } else if (head.body == HttpHead::Body::kSized && head.content_length > kSmallBodyBytes) {
    if (bytes_in_flight_ + head.content_length > max_bytes_) {
      return "too many large request bodies at once; retry later";
    }
    bytes_in_flight_ += head.content_length;
    share->bytes = head.content_length;
  }
  return nullptr;
}

void BodyBudget::Release(Share* share) {
  absl::MutexLock lock(&mu_);
  bytes_in_flight_ -= share->bytes;
  if (share->chunked_slot) --chunked_in_flight_;
  *share = Share();
}

uint64_t BodyBudget::bytes_in_flight() const {
  absl::MutexLock lock(&mu_);
  return bytes_in_flight_;
}

int BodyBudget::chunked_in_flight() const {
  absl::MutexLock lock(&mu_);
  return chunked_in_flight_;
}

}  // namespace pagoda
