#include "router/core/ordered_sink.h"

#include <utility>

namespace pagoda {

OrderedSink::OrderedSink(RequestSink sink) : sink_(std::move(sink)) {}

uint64_t OrderedSink::Ticket() {
  absl::MutexLock lock(&mu_);
  return issued_++;
}

bool OrderedSink::Deliver(uint64_t ticket, const RequestUpdate& update) {
  absl::MutexLock lock(&mu_);
  auto turn = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return delivered_ == ticket; };
  mu_.Await(absl::Condition(&turn));
  const bool go_on = sink_(update);
  ++delivered_;
  return go_on;
}

}  // namespace pagoda
