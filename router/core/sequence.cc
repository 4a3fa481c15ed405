#include "router/core/sequence.h"

namespace pagoda {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

std::unique_ptr<Sequence> Sequence::Fork(int f) const {
  auto child = std::make_unique<Sequence>(*this);
  child->id = id + f;
  child->seq_index = seq_index + f;
  child->num_pending_forks = 0;
  child->on_worker = false;
  child->num_synced_blocks = 0;
  return child;
}

}  // namespace pagoda
