// The caps on paused sequences (a paused sequence: its client stopped reading, so the router
// holds its output and, until a waiting request needs it, its KV). A client that opens many
// calls and reads none would otherwise hold router memory and recompute work for all of them
// until --stall-timeout-s; past a cap, its oldest paused calls are cancelled, so the newest
// (those a slow but honest reader is most likely to read next) survive.
//
//   paused calls, newest first ──► count per connection and per client ──► past either cap:
//                                   cancelled (not counted), else counted
//
// Plain C++, no state: the Cluster calls ReviewPaused at each Tick with the requests it holds,
// which also ends a request whose client read nothing for the stall timeout.
#ifndef PAGODA_ROUTER_CORE_PAUSED_CAPS_H_
#define PAGODA_ROUTER_CORE_PAUSED_CAPS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "router/core/engine.h"
#include "router/core/router_metrics.h"

namespace pagoda {

struct PausedCaps {
  int max_per_connection = 0;  // paused sequences per connection; 0: no cap
  int max_per_client = 0;      // paused sequences per client (IP address); 0: no cap
  // Paused sequences over the whole router, whoever holds them (many clients each under their
  // own caps still hold router memory and KV); 0: no cap.
  int max_total = 0;
};

// One paused core request (a call may have several; each counts its own sequences).
struct PausedRequest {
  int64_t request_id = 0;
  absl::Time paused_since;            // ties go by request_id: the lower is older
  int num_sequences = 0;              // its unfinished sequences
  const RequestPeer* peer = nullptr;  // Not owned; must outlive the call.
};

enum class PausedCap { kConnection, kClient, kRouter };

struct PausedCancel {
  int64_t request_id = 0;
  PausedCap cap;  // the cap it passed (the connection's first)
};

// The requests to cancel so that no connection and no client holds more paused sequences than
// its cap: the oldest paused go first. A request with more sequences than a cap is cancelled
// whenever it pauses, so a cap should be at least the largest n (the router checks that).
std::vector<PausedCancel> OverPausedCaps(std::vector<PausedRequest> paused, const PausedCaps& caps);

// One request as a Tick sees it.
struct PauseState {
  int64_t request_id = 0;
  bool paused = false;  // its client is not reading now
  // Since when every Tick has seen it paused (InfiniteFuture: not paused at the last). In and
  // out: ReviewPaused keeps it.
  absl::Time* paused_since = nullptr;
  int num_sequences = 0;              // its unfinished sequences
  const RequestPeer* peer = nullptr;  // Not owned; must outlive the call.
};

// What to do about paused requests at one Tick.
struct PauseReview {
  // The requests to end with their errors: stalled (DEADLINE_EXCEEDED), then past a cap
  // (RESOURCE_EXHAUSTED), each message naming the flag that set the bound.
  std::vector<std::pair<int64_t, absl::Status>> end;
  int num_stalled = 0;
  int num_over_connection_cap = 0;
  int num_over_client_cap = 0;
  int num_over_router_cap = 0;
  int num_paused = 0;  // sequences left paused (not ended)
};

// Tick's rule for paused requests: a request paused at every Tick for `stall_timeout` ends, and
// of the others, the oldest paused past a cap (OverPausedCaps) end.
PauseReview ReviewPaused(const std::vector<PauseState>& requests, absl::Time now,
                         absl::Duration stall_timeout, const PausedCaps& caps);
// Counts the review's cancellations in `metrics` (none when null) and logs them, at most one
// line in 100 reviews that cancel.
void ReportPauseReview(const PauseReview& review, RouterMetrics* metrics);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_PAUSED_CAPS_H_
